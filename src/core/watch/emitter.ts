/**
 * A tiny event emitter with VS Code's shape (`event(listener)` returns something to dispose), so
 * that the model needs nothing from `vscode` and runs under plain mocha.
 */
export interface Disposable {
  dispose(): void;
}

export type Event<T> = (listener: (e: T) => void) => Disposable;

export class Emitter<T> implements Disposable {
  private listeners = new Set<(e: T) => void>();

  readonly event: Event<T> = (listener) => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };

  fire(e: T): void {
    // A listener that throws must not keep the others from hearing of the change.
    for (const l of [...this.listeners]) {
      try {
        l(e);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  dispose(): void {
    this.listeners.clear();
  }
}
