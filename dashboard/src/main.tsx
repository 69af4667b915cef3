import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { session } from './api';
import { Endpoints } from './endpoints';
import { Operator } from './operator';
import { JobPage } from './job-page';
import { Jobs } from './jobs';
import { NewJob } from './new-job';
import { SignIn } from './sign-in';
import './style.css';

/** Hash routes: #/jobs, #/jobs/<uuid>, #/new, #/endpoints, #/operator. */
function useRoute(): string[] {
  const read = () => (location.hash.replace(/^#\/?/, '') || 'jobs').split('/');
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

function App() {
  const route = useRoute();
  const [apiKey, setApiKey] = useState(session.apiKey());
  const [adminToken, setAdminToken] = useState(session.adminToken());
  const operator = route[0] === 'operator';
  const signOut = () => {
    if (operator) {
      session.setAdminToken(null);
      setAdminToken(null);
    } else {
      session.setApiKey(null);
      setApiKey(null);
    }
  };
  // Move focus to the page's heading on navigation (screen readers announce the new page).
  useEffect(() => {
    document.querySelector<HTMLElement>('main h1')?.focus();
  }, [route.join('/')]);

  let page;
  if (operator) page = <Operator token={adminToken} onToken={setAdminToken} />;
  else if (!apiKey) page = <SignIn onKey={setApiKey} />;
  else if (route[0] === 'jobs' && route[1]) page = <JobPage uuid={route[1]} key={route[1]} />;
  else if (route[0] === 'new') page = <NewJob />;
  else if (route[0] === 'endpoints') page = <Endpoints />;
  else page = <Jobs />;

  const signedIn = operator ? adminToken : apiKey;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <span class="brand">media-jobs</span>
        <nav aria-label="Main">
          <a
            href="#/jobs"
            aria-current={!operator && route[0] !== 'new' && route[0] !== 'endpoints' ? 'page' : undefined}
          >
            Jobs
          </a>
          <a href="#/new" aria-current={route[0] === 'new' ? 'page' : undefined}>
            New job
          </a>
          <a href="#/endpoints" aria-current={route[0] === 'endpoints' ? 'page' : undefined}>
            Webhooks
          </a>
          <a href="#/operator" aria-current={operator ? 'page' : undefined}>
            Operator
          </a>
        </nav>
        {signedIn && (
          <button type="button" class="secondary" onClick={signOut}>
            Sign out
          </button>
        )}
      </header>
      <main id="main">{page}</main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
