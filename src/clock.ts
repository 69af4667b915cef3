/** Time comes from here so tests can move it (idempotency expiry, URL expiry, schedules). */
export interface Clock {
  now(): number;
}
export const systemClock: Clock = { now: () => Date.now() };
