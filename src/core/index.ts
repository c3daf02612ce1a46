/**
 * The lock core of Devserver Staging: `require('devserver-staging/core')`.
 * Never imports `vscode`: the command-line tool, the extension and other Node programs share it.
 */
export { acquire, withLock, release, heldLeases, describeHolder, Lease } from './lock/lock';
export type { AcquireOptions, ReleaseOptions, LeaseEvents } from './lock/lock';
export { inspect, list } from './lock/inspect';
export { queueOf, queueDirOf, describeWaiter, clearLine } from './lock/queue';
export type { OnQueue, ClearLineOptions, ClearedLine } from './lock/queue';
export { lockIdOf } from './lock/judge';
export { forceRelease, destroy, shownLock } from './remove';
export { allowProbes } from './base/probes';
export type { ForceReleaseOptions, DestroyOptions, ShownLock } from './remove';
export { explainLoss, lossWords, lossSentence, describeActor } from './loss';
export type { LockLoss, LossKind, LostLease, ExplainOptions } from './loss';
export { appendAudit } from './log/audit';
export type { AuditEntry } from './log/audit';
export { history, lastHeld, flushHistory, HISTORY_KINDS } from './log/history';
export type { HistoryActor, HistoryEvent, HistoryKind, HistoryOptions, HistoryPrevious, HistoryQuery, LastHeld } from './log/history';
export { stage } from './stage/stage';
export { usage, prune } from './usage';
export type { AreaUsage, PruneOptions, PruneResult } from './usage';
export type { StageOptions, StageProgress, StageResult, ManifestEntry, Manifest } from './stage/types';
export { MANIFEST_FILE, TIMESTAMP_FILE, DEFAULT_MAX_BYTES } from './stage/types';
export { IN_EDITOR_MAX_PARSE, parseManifest, readManifest } from './build/manifest';
export { verify, describeEntryType } from './verify';
export { readBuildDir, readBuildArtifacts } from './build/browse';
export type { BuildEntry } from './build/browse';
export { ContentsCache, buildContents } from './contents';
export type { BuildContents } from './contents';
export type { VerifyOptions, VerifyProblem, VerifyProblemKind, VerifyProgress, VerifyResult, ArtifactFacts, EntryType } from './verify';
export { findBuildAbove } from './lock/nesting';
export { parseTag, isInside } from './fs/tags';
export { StagingError, isStagingError } from './base/errors';
export type { ErrorCode, ErrorReason, NextStep } from './base/errors';
export { isOnThisMachine, isHolderAlive } from './base/holder';
export { BUILD_MARKS, clampTiming, isProtocolName, isBookkeeping, DEFAULT_TIMING, LOCK_NAME, LOCK_TARGET, OWNER_FILE, META_DIR, AUDIT_LOG, HISTORY_DIR } from './base/protocol';
export type { Holder, LegacyHolder, ListEntry, LockInfo, LockState, QueueEntry, Timing, Waiter } from './base/types';
export { formatBytes, formatCount, formatDuration, naturalOrder, printable, readPrintable, printableTime, jsonText } from './base/format';
export { parseDuration, parseSize } from './base/units';
export { decodeName, encodeName, fsPath, hasRawBytes } from './base/rawNames';
export { pause, sortInSlices } from './base/slices';
export { LockStates } from './watch/states';
export { threadWatcher } from './watch/threadWatcher';
export type { StateChange, Warnings } from './watch/states';
export { Emitter } from './watch/emitter';
export type { Disposable, Event } from './watch/emitter';
export { keyOf, parentTag, isAtOrBelow } from './watch/records';
export type { AreaRef, AreaKind, AreaRecord, Artifact, BuildUsage, Counts, Owner } from './watch/records';
