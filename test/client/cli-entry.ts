/** Runs a client command as its own process (until src/main.ts dispatches them itself). */
import { runClientCommand } from '../../src/cli/client.js';

process.exitCode = await runClientCommand(process.argv.slice(2));
