/**
 * The lock core of Devserver Staging: `require('devserver-staging/core')`.
 * Never imports `vscode`: the command-line tool, the extension and other Node programs share it.
 */
export { acquire, withLock, release, heldLeases, describeHolder, Lease } from './lock';
export type { AcquireOptions, ReleaseOptions, LeaseEvents } from './lock';
export { inspect, list } from './inspect';
export { forceRelease, destroy, appendAudit } from './remove';
export type { ForceReleaseOptions, DestroyOptions, AuditEntry } from './remove';
export { parseTag, isInside } from './tags';
export { StagingError, isStagingError } from './errors';
export type { ErrorCode } from './errors';
export { DEFAULT_TIMING, LOCK_NAME, LOCK_TARGET, OWNER_FILE, META_DIR, AUDIT_LOG } from './protocol';
export type { Holder, LegacyHolder, ListEntry, LockInfo, LockState, Timing } from './types';
