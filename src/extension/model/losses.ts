/**
 * Locks this window lost and the user has not yet been told of (or has not dismissed): each with
 * who broke it and when, as the core found out (`explainLoss`). The view renders them (a
 * notification that stays until dismissed, a word in the status bar); nothing else keeps them.
 */
import { Emitter, type Disposable, type LockLoss } from '../../core';

export class Losses implements Disposable {
  private readonly list: LockLoss[] = [];
  private readonly _onDidChange = new Emitter<void>();
  readonly onDidChange = this._onDidChange.event;
  private readonly _onDidAdd = new Emitter<LockLoss>();
  /** Fires with each loss as it is found: the view tells the user of it. */
  readonly onDidAdd = this._onDidAdd.event;

  /** Those not dismissed yet, oldest first. */
  get all(): readonly LockLoss[] {
    return this.list;
  }

  add(loss: LockLoss): void {
    this.list.push(loss);
    this._onDidAdd.fire(loss);
    this._onDidChange.fire();
  }

  /** The user has read it (closed its notification or chose one of its buttons). */
  dismiss(loss: LockLoss): void {
    const i = this.list.indexOf(loss);
    if (i < 0) return;
    this.list.splice(i, 1);
    this._onDidChange.fire();
  }

  dispose(): void {
    this._onDidChange.dispose();
    this._onDidAdd.dispose();
  }
}
