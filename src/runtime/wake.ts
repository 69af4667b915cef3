/**
 * The one wait of every background loop, long poll and client retry: until a wake-up, a timeout,
 * or an abort, whichever comes first. A wake-up that arrives while the owner is busy (between
 * "looked, found nothing" and "started waiting") is kept, and makes the next wait return at once:
 * none is lost. Server-free: the client and the worker SDK use it too.
 */
export class Wakeable {
  private woken = false;
  private release: (() => void) | undefined;

  /** The one sleep: resolves after `ms`, or at once when `signal` aborts (it never rejects). */
  static async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    await new Wakeable().wait(ms, signal);
  }

  wake(): void {
    this.woken = true;
    const r = this.release;
    this.release = undefined;
    r?.();
  }

  /** Forgets a kept wake-up (the owner is about to look anyway). */
  clear(): void {
    this.woken = false;
  }

  /** Waits up to `ms`; answers true when woken (the wake-up is consumed), false on timeout or abort. */
  wait(ms: number, signal?: AbortSignal): Promise<boolean> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve(true);
    }
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const finish = (woken: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (this.release === onWake) this.release = undefined;
        if (woken) this.woken = false;
        resolve(woken);
      };
      const onWake = () => {
        finish(true);
      };
      const onAbort = () => {
        finish(false);
      };
      const timer = setTimeout(onAbort, Math.max(0, ms));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.release = onWake;
    });
  }
}
