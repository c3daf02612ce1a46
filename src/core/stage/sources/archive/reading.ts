/**
 * What the tar and zip readers share: an inbox that hands the events of stream callbacks to their
 * generators, the wait for an entry's content to be read or dropped, and how both formats mark a
 * directory in a name.
 */
import type { Readable } from 'stream';

/**
 * Hands events from stream callbacks to an async generator, which waits for one at a time.
 * A failure (a broken archive, an abort) wakes the generator at once and wins over queued items.
 */
export class Inbox<T> {
  private readonly items: T[] = [];
  private failure: { error: unknown } | undefined;
  private wake: (() => void) | undefined;

  get failed(): boolean {
    return this.failure !== undefined;
  }

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  fail(error: unknown): void {
    this.failure ??= { error };
    this.wake?.();
  }

  async take(): Promise<T> {
    for (;;) {
      if (this.failure) throw this.failure.error;
      if (this.items.length > 0) return this.items.shift()!;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }

  /** Waits for `pending`, or throws the failure as soon as there is one. */
  async until<R>(pending: Promise<R>): Promise<R> {
    let outcome: { value: R } | { error: unknown } | undefined;
    pending.then(
      (value) => {
        outcome = { value };
        this.wake?.();
      },
      (error: unknown) => {
        outcome = { error };
        this.wake?.();
      },
    );
    for (;;) {
      if (this.failure) throw this.failure.error;
      if (outcome) {
        if ('error' in outcome) throw outcome.error;
        return outcome.value;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}

/** Resolves once `stream` has ended or was destroyed, however that happened. */
export function settledOf(stream: Readable): Promise<void> {
  if (stream.readableEnded || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off('end', done);
      stream.off('close', done);
      resolve();
    };
    stream.on('end', done);
    stream.on('close', done);
  });
}

export const noop = (): void => undefined;

export function stripTrailingSlash(name: string): string {
  // A trailing '/' is how tar and zip mark a directory, not part of its name.
  return name.length > 1 && name.endsWith('/') ? name.slice(0, -1) : name;
}
