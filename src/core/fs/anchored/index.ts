/**
 * Acting on the directory that was checked, not on a path that can be re-pointed in between.
 *
 * A shared static directory has co-users who can rename a directory and put a symlink in its place
 * at any instant. A check by path followed by an action by path (realpath, then rename) can then act
 * outside the static directory. So every operation opens the directory it means once
 * (`O_DIRECTORY`, and `O_NOFOLLOW` where a link is not allowed), checks what it opened, and does
 * everything below it through `/proc/self/fd/<fd>/<name>`, which the kernel resolves from the opened
 * directory itself, wherever it has been moved since. Node has no `openat`; this is its effect
 * without a native module (Linux only, as the rest of the core).
 *
 * The tool's own files (owner records, manifests, the audit log, clock probes, timestamps, parts)
 * are never reached through a link: they are created with `O_CREAT | O_EXCL | O_NOFOLLOW`, opened
 * with `O_NOFOLLOW | O_NONBLOCK` (a FIFO planted in their place cannot block the open), and read
 * only when the open descriptor is a regular file of a bounded size. One is written, appended to
 * or touched only when the open descriptor is a regular file with one link: a hard link is the
 * same file under another name, and that name may be outside the static directory.
 *
 * One file per job here: directories (dir.ts), paths below a root (openPath.ts), what a record must
 * be (refuse.ts), reading and writing records (readRecord.ts, writeRecord.ts), mount points
 * (mounts.ts), removing trees (remove.ts); their calls go through one adapter (../calls.ts).
 */
export {
  type Dir,
  type MakeOptions,
  fdPath,
  openBelow,
  openDir,
  openDirIfThere,
  openDirWhere,
  openOrMakeBelow,
  whereIs,
} from './dir';
export { isInside, isWithin, openPath, relativeInside } from './openPath';
export { type RecordLimits, hardLinked, notARecord, refuseUnlessOneLink } from './refuse';
export { type RecordTail, readRecord, readRecordBytes, readRecordBytesSync, readRecordSync, readRecordTail, readRecordUnlessSeen, recordIdentity } from './readRecord';
export { type AppendOptions, type AppendOutcome, type TouchOutcome, appendRecord, createRecord, createRecordSync, touchRecord } from './writeRecord';
export { mountPoints } from './mounts';
export { type RemoveOptions, removeTree } from './remove';
