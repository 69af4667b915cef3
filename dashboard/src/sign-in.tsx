import { useState } from 'preact/hooks';
import { api, session } from './api';
import { ErrorNote, errorText } from './common';

export function SignIn({ onKey }: { onKey: (k: string) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    session.setApiKey(key.trim());
    try {
      await api('/jobs?limit=1');
      onKey(key.trim());
    } catch (err) {
      session.setApiKey(null);
      setError(errorText(err));
    }
  };
  return (
    <section class="narrow">
      <h1 tabIndex={-1}>Sign in</h1>
      <p>Paste an API key. It stays in this browser tab only (session storage) and is sent as a Bearer header.</p>
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autoComplete="off"
          required
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
        <button type="submit">Sign in</button>
      </form>
      <ErrorNote error={error} />
    </section>
  );
}
