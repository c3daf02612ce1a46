/**
 * Whether this process may write the probes that only help it look. Judging a lock on a network
 * filesystem writes a little: a file to read the filesystem's clock (clock.ts), and an entry made
 * and removed to see past a client's cached attributes (judge.ts). A process that must change
 * nothing on disk (an editor whose workspace is not trusted) turns them off; it then trusts its
 * own clock and the client's caches, which can only make what it shows less exact, never act.
 */
let allowed = true;

export function allowProbes(allow: boolean): void {
  allowed = allow;
}

export function probesAllowed(): boolean {
  return allowed;
}
