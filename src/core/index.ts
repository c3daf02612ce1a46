/**
 * The lock core of Devserver Staging: `require('devserver-staging/core')`.
 * Never imports `vscode`: the command-line tool, the extension and other Node programs share it.
 */
export { acquire, withLock, release, heldLeases, describeHolder, Lease } from './lock';
export type { AcquireOptions, ReleaseOptions, LeaseEvents } from './lock';
export { inspect, list } from './inspect';
export { queueOf, queueDirOf, describeWaiter, clearLine } from './queue';
export type { OnQueue, ClearLineOptions, ClearedLine } from './queue';
export { lockIdOf } from './judge';
export { forceRelease, destroy, shownLock } from './remove';
export { allowProbes } from './probes';
export type { ForceReleaseOptions, DestroyOptions, ShownLock } from './remove';
export { explainLoss, lossWords, lossSentence, describeActor } from './loss';
export type { LockLoss, LossKind, LostLease, ExplainOptions } from './loss';
export { appendAudit } from './audit';
export type { AuditEntry } from './audit';
export { history, lastHeld, flushHistory, HISTORY_KINDS } from './history';
export type { HistoryActor, HistoryEvent, HistoryKind, HistoryOptions, HistoryPrevious, HistoryQuery, LastHeld } from './history';
export { stage } from './stage/stage';
export { usage, prune } from './usage';
export type { AreaUsage, PruneOptions, PruneResult } from './usage';
export type { StageOptions, StageProgress, StageResult, ManifestEntry, Manifest } from './stage/types';
export { MANIFEST_FILE, TIMESTAMP_FILE, DEFAULT_MAX_BYTES } from './stage/types';
export { IN_EDITOR_MAX_PARSE, parseManifest, readManifest } from './manifest';
export { verify, describeEntryType } from './verify';
export { readBuildDir, readBuildArtifacts } from './browse';
export type { BuildEntry } from './browse';
export { ContentsCache, buildContents } from './contents';
export type { BuildContents } from './contents';
export type { VerifyOptions, VerifyProblem, VerifyProblemKind, VerifyProgress, VerifyResult, ArtifactFacts, EntryType } from './verify';
export { findBuildAbove } from './nesting';
export { parseTag, isInside } from './tags';
export { StagingError, isStagingError } from './errors';
export type { ErrorCode, ErrorReason, NextStep } from './errors';
export { isOnThisMachine, isHolderAlive } from './holder';
export { BUILD_MARKS, clampTiming, isProtocolName, isBookkeeping, DEFAULT_TIMING, LOCK_NAME, LOCK_TARGET, OWNER_FILE, META_DIR, AUDIT_LOG, HISTORY_DIR } from './protocol';
export type { Holder, LegacyHolder, ListEntry, LockInfo, LockState, QueueEntry, Timing, Waiter } from './types';
export { formatBytes, formatCount, formatDuration, naturalOrder, printable, readPrintable, printableTime, jsonText } from './format';
export { decodeName, encodeName, fsPath, hasRawBytes } from './rawNames';
export { pause, sortInSlices } from './slices';
export { LockStates } from './watch/states';
export { threadWatcher } from './watch/threadWatcher';
export type { StateChange, Warnings } from './watch/states';
export { Emitter } from './watch/emitter';
export type { Disposable, Event } from './watch/emitter';
export { keyOf, parentTag, isAtOrBelow } from './watch/records';
export type { AreaRef, AreaKind, AreaRecord, Artifact, BuildUsage, Counts } from './watch/records';
