import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { admin, api, session } from './api';
import { ErrorNote, errorText } from './common';

/**
 * A sign-in page for a secret (an API key or an admin token): the secret is stored for this tab, tried
 * with one call, and dropped again if that call fails.
 */
function SecretSignIn(props: {
  title: string;
  intro: ComponentChildren;
  id: string;
  label: string;
  store: (secret: string | null) => void;
  check: () => Promise<unknown>;
  onSecret: (secret: string) => void;
}) {
  const [secret, setSecret] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    props.store(secret.trim());
    try {
      await props.check();
      props.onSecret(secret.trim());
    } catch (err) {
      props.store(null);
      setError(errorText(err));
    }
  };
  return (
    <section class="narrow">
      <h1 tabIndex={-1}>{props.title}</h1>
      <p>{props.intro}</p>
      <form onSubmit={submit}>
        <label for={props.id}>{props.label}</label>
        <input
          id={props.id}
          name={props.id}
          type="password"
          autoComplete="off"
          required
          value={secret}
          onInput={(e) => setSecret(e.currentTarget.value)}
        />
        <button type="submit">Sign in</button>
      </form>
      <ErrorNote error={error} />
    </section>
  );
}

export function SignIn({ onKey }: { onKey: (k: string) => void }) {
  return (
    <SecretSignIn
      title="Sign in"
      intro="Paste an API key. It stays in this browser tab only (session storage) and is sent as a Bearer header."
      id="api-key"
      label="API key"
      store={(k) => session.setApiKey(k)}
      check={() => api('/jobs?limit=1')}
      onSecret={onKey}
    />
  );
}

export function OperatorSignIn({ onToken }: { onToken: (t: string) => void }) {
  return (
    <SecretSignIn
      title="Operator sign in"
      intro={
        <>
          Paste an admin token (<code>media-jobs admin create-token</code>). It stays in this tab only.
        </>
      }
      id="admin-token"
      label="Admin token"
      store={(t) => session.setAdminToken(t)}
      check={() => admin('/overview')}
      onSecret={onToken}
    />
  );
}
