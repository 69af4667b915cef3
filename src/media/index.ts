export {
  checkUrl,
  checkUrlSyntax,
  defaultLookupAll,
  ipLiteralOf,
  isPublicAddress,
  DNS_TIMEOUT_MS,
  MAX_URL_LENGTH,
  type IsPublic,
  type LookupAll,
  type UrlCheck,
  type UrlPolicyOptions,
} from './policy.js';
export {
  BlockedAddressError,
  UnresolvableHostError,
  createGuardedAgent,
  type GuardedAgentOptions,
} from './guarded-agent.js';
export { fetchMedia, type FetchMediaOptions } from './fetch.js';
