/**
 * Each error code of the core as a VS Code user should read it: what happened, to which build, in
 * words of the editor, with buttons that do the next step (as the git extension's command
 * wrapper does per error code). One entry per code; anything else keeps its own message.
 */
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { MANIFEST_FILE, errnoCode, isStagingError, type ErrorCode, type NextStep, type StagingError } from '../../core';
import { errorMessage } from '../errors';
import { clipboardText } from '../shown';
import { holderOf, locate, sinceOf } from './targets';

/** A button on the message, and what it does. */
export interface ErrorAction {
  title: string;
  run(): Thenable<unknown>;
}

/** A button that runs one of the extension's commands (or VS Code's). */
const run = (title: string, command: string, ...args: unknown[]): ErrorAction => ({ title, run: () => vscode.commands.executeCommand(command, ...args) });

export interface ShownError {
  message: string;
  actions: ErrorAction[];
}

/** Where in the configured static directories a path lies, if it does. */
type Where = (p: string | undefined) => { staticDir: string; tag: string } | undefined;

const forceReleaseAction = (staticDir: string, tag: string): ErrorAction => run(vscode.l10n.t('Force Release…'), 'devserverStaging.forceRelease', undefined, undefined, { staticDir, tag });
const cleanUpAction = (p: string): ErrorAction => run(vscode.l10n.t('Clean Up…'), 'devserverStaging.cleanUp', undefined, undefined, { path: p });
const openSettings = (): ErrorAction => run(vscode.l10n.t('Open Settings'), 'workbench.action.openSettings', 'devserverStaging.staticDirs');

/**
 * The button that takes a next step of the core, where the editor has one: the core says what can
 * be done, the extension offers its own command for it. Steps about builds outside the configured
 * static directories get none.
 */
function stepAction(step: NextStep, err: StagingError, where: Where): ErrorAction | undefined {
  switch (step.kind) {
    case 'wait':
    case 'join-line':
      return run(vscode.l10n.t('Lock When Free'), 'devserverStaging.lockWhenFree', undefined, undefined, { staticDir: step.staticDir, tag: step.tag });
    case 'force-release':
      return forceReleaseAction(step.staticDir, step.tag);
    case 'add':
      return run(vscode.l10n.t('Add Artifacts…'), 'devserverStaging.addArtifacts', undefined, undefined, { staticDir: step.staticDir, tag: step.tag });
    case 'repair-manifest':
      return run(vscode.l10n.t('Open Manifest'), 'vscode.open', vscode.Uri.file(step.file));
    case 'destroy': {
      const at = err.path !== undefined ? where(path.basename(err.path) === MANIFEST_FILE ? path.dirname(err.path) : err.path) : undefined;
      return at !== undefined && at.tag !== '' ? run(vscode.l10n.t('Destroy…'), 'devserverStaging.destroy', undefined, undefined, { staticDir: at.staticDir, tag: at.tag }) : undefined;
    }
    case 'free-space':
      return where(step.dir) !== undefined ? cleanUpAction(step.dir) : undefined;
    case 'give-static-dir':
      return run(vscode.l10n.t('Add Static Directory…'), 'devserverStaging.chooseStaticDir');
    case 'reserve-again':
      return run(vscode.l10n.t('Reserve…'), 'devserverStaging.reserve', undefined, undefined, { staticDir: step.staticDir, tag: step.tag });
    case 'ask-owner':
      return forceReleaseAction(step.staticDir, step.tag);
    case 'give-duration':
      // The editor asks for the length again with its choices.
    case 'verify':
    case 'raise-size-limit':
      // Neither has a command here: the editor verifies with the same bounded reader, and sets no size limit.
      return undefined;
  }
}

/** The buttons of an error's next steps, in the core's order. */
function stepActions(err: StagingError, where: Where): ErrorAction[] {
  return (err.next ?? []).map((s) => stepAction(s, err, where)).filter((a): a is ErrorAction => a !== undefined);
}

/** Errors of the filesystem, by errno: the same words whether the core or the editor met them. */
function fsError(errno: string | undefined, p: string | undefined, fallback: string, where: Where): ShownError | undefined {
  const shown = p ?? vscode.l10n.t('a file');
  switch (errno) {
    case 'ENOSPC':
    case 'EDQUOT':
      return { message: vscode.l10n.t('The filesystem of {0} is full (or this user’s quota is used up). Nothing more can be staged there until some space is freed.', shown), actions: p !== undefined && where(p) !== undefined ? [cleanUpAction(p)] : [] };
    case 'EACCES':
    case 'EPERM':
      return { message: vscode.l10n.t('This user ({0}) may not change {1}: check its permissions, or ask its owner.', os.userInfo().username, shown), actions: p !== undefined ? [{ title: vscode.l10n.t('Copy Path'), run: () => vscode.env.clipboard.writeText(clipboardText(p)) }] : [] };
    case 'EROFS':
      return { message: vscode.l10n.t('{0} is on a read-only filesystem.', shown), actions: [] };
    default:
      return fallback === '' ? undefined : { message: fallback, actions: [] };
  }
}

type Describe = (err: StagingError, where: Where) => ShownError | undefined;

const BY_CODE: Partial<Record<ErrorCode, Describe>> = {
  ELOCKED(err, where) {
    const lock = err.lock;
    if (lock === undefined) return undefined;
    const tag = lock.tag;
    const since = sinceOf(lock);
    const message =
      err.next?.some((s) => s.kind === 'join-line') === true
        ? vscode.l10n.t('{0} is free, but others are waiting for it in line, and those who wait go first: Lock When Free takes a place in that line.', tag)
        : lock.state === 'legacy'
        ? vscode.l10n.t('{0} has a legacy lock of {1}. Locks of the Python devserver are never taken over: force-release it if its holder is gone.', tag, holderOf(lock))
        : lock.state === 'stale'
          ? vscode.l10n.t('{0} has a stale lock of {1} that could not be taken over{2}.', tag, holderOf(lock), lock.staleReason !== undefined ? ` (${lock.staleReason})` : '')
          : since !== undefined
            ? vscode.l10n.t('{0} is held by {1} since {2}.', tag, holderOf(lock), since)
            : vscode.l10n.t('{0} is held by {1}.', tag, holderOf(lock));
    const purpose = lock.holder?.purpose;
    const said = purpose !== undefined && purpose !== '' ? `${message} ${vscode.l10n.t('Its purpose: “{0}”.', purpose)}` : message;
    // Waiting in line is the everyday answer to a held lock, breaking it the exception: the core's steps come in that order.
    return { message: said, actions: stepActions(err, where) };
  },
  EEXIST(err, where) {
    const at = where(err.path);
    if (at === undefined) return undefined;
    return {
      message: vscode.l10n.t('{0} exists already: use Add Artifacts… to stage into it, or choose another tag.', at.tag),
      actions: [run(vscode.l10n.t('Add Artifacts…'), 'devserverStaging.addArtifacts', undefined, undefined, { staticDir: at.staticDir, tag: at.tag })],
    };
  },
  ENOENT(err, where) {
    const at = where(err.path);
    const what = at !== undefined && at.tag !== '' ? at.tag : err.path;
    if (what === undefined) return undefined;
    return { message: vscode.l10n.t('{0} is no longer there: another process removed or moved it.', what), actions: [run(vscode.l10n.t('Refresh'), 'devserverStaging.refresh')] };
  },
  EBADSTATICDIR(err) {
    const dir = err.path;
    if (dir === undefined) return { message: vscode.l10n.t('No static directory is configured.'), actions: [run(vscode.l10n.t('Add Static Directory…'), 'devserverStaging.chooseStaticDir')] };
    if (err.reason === 'missing') {
      return {
        message: vscode.l10n.t('The static directory {0} does not exist.', dir),
        actions: [run(vscode.l10n.t('Create Directory'), 'devserverStaging.createStaticDir', undefined, undefined, { dir }), openSettings()],
      };
    }
    if (err.reason === 'not-a-directory') return { message: vscode.l10n.t('The static directory {0} is not a directory.', dir), actions: [openSettings()] };
    return { message: errorMessage(err), actions: [openSettings()] };
  },
  ETOOBIG(err, where) {
    // Which limit: the free space of the filesystem, or the size limit of one staging (not set in the editor).
    if (err.reason === 'free-space') return { message: `${err.facts} ${vscode.l10n.t('Clean up old builds or stage onto a larger filesystem.')}`, actions: stepActions(err, where) };
    return { message: err.reason === 'max-size' ? err.facts : errorMessage(err), actions: stepActions(err, where) };
  },
  ECORRUPT(err, where) {
    const file = err.path;
    if (file === undefined) return undefined;
    const at = where(path.basename(file) === MANIFEST_FILE ? path.dirname(file) : file);
    const what = err.detail;
    const build = at?.tag ?? path.dirname(file);
    return {
      message:
        (what !== undefined ? vscode.l10n.t('The manifest of {0} is damaged: {1}. Nothing was changed.', build, what) : vscode.l10n.t('The manifest of {0} is damaged. Nothing was changed.', build)) +
        ' ' +
        vscode.l10n.t('To repair it, move the manifest aside and stage the build’s sources again with Add Artifacts…, or destroy the build and stage it anew.'),
      actions: stepActions(err, where),
    };
  },
  EUNFINISHED(err, where) {
    const at = where(err.path);
    const build = at?.tag ?? err.path;
    if (build === undefined) return undefined;
    const errno = errnoCode(err.cause);
    const full = errno === 'ENOSPC' || errno === 'EDQUOT';
    return {
      message:
        vscode.l10n.t(
          'A staging of {0} was cut off and could not be undone yet. Nothing is lost: what it replaced is kept beside the build’s lock, and whoever locks {0} next finishes undoing it once the cause is gone. Until then {0} cannot be locked.',
          build,
        ) + (full ? ` ${vscode.l10n.t('The cause: its filesystem is full. Free some space, then try again.')}` : ''),
      actions: full && err.path !== undefined && at !== undefined ? [cleanUpAction(err.path)] : [],
    };
  },
  EIO(err, where) {
    return fsError(errnoCode(err.cause), err.path, '', where);
  },
};

/** The message and buttons for any error a command can meet; buttons act on builds in `staticDirs` only. */
export function describeError(err: unknown, staticDirs: readonly string[]): ShownError {
  const where: Where = (p) => (p === undefined ? undefined : locate(staticDirs, p));
  if (isStagingError(err)) {
    const shown = BY_CODE[err.code]?.(err, where);
    if (shown !== undefined) return shown;
    return { message: errorMessage(err), actions: stepActions(err, where) };
  }
  const errno = errnoCode(err);
  return fsError(errno, (err as NodeJS.ErrnoException | undefined)?.path, errorMessage(err), where) ?? { message: errorMessage(err), actions: [] };
}
