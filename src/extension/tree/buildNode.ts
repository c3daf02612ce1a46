/** A build: a directory that was staged or locked, with its lock state and its artifacts below. */
import * as vscode from 'vscode';
import { formatBytes, formatCount, formatDuration as formatAge, type AreaRecord, type LastHeld, type LockInfo, type LockState, type ReservationInfo } from '../../core';
import { endOf } from '../model/reservation';
import { literal } from '../markdown';
import { rowText } from '../shown';
import { AreaRow } from './areaRow';
import type { FolderNode } from './folderNode';
import type { StaticDirNode } from './staticDirNode';
import type { InLine, Staging } from '../model/mine';

interface Look {
  icon: string;
  color?: string;
  label: string;
}

/** Icon, colour and words per lock state: the only things that vary by state. */
const LOOKS: Record<LockState, Look> = {
  free: { icon: 'package', label: vscode.l10n.t('free') },
  held: { icon: 'lock', color: 'charts.yellow', label: vscode.l10n.t('held') },
  stale: { icon: 'warning', color: 'problemsWarningIcon.foreground', label: vscode.l10n.t('stale') },
  legacy: { icon: 'lock', color: 'charts.purple', label: vscode.l10n.t('legacy lock') },
};
const MINE: Look = { icon: 'account', color: 'charts.green', label: vscode.l10n.t('held by you') };
const RESERVED: Look = { icon: 'calendar', color: 'charts.yellow', label: vscode.l10n.t('reserved') };
const MY_RESERVATION: Look = { icon: 'calendar', color: 'charts.green', label: vscode.l10n.t('reserved by you') };
const STAGING: Look = { icon: 'sync~spin', color: 'charts.green', label: vscode.l10n.t('staging') };
const DAMAGED: Look = { icon: 'error', color: 'errorForeground', label: vscode.l10n.t('damaged') };

/** What this window has to do with a build, as the row shows it. */
export interface Ownership {
  mine: boolean;
  staging: Staging | undefined;
  /** This window's place in the build's line, while it waits for the lock (Lock When Free). */
  inLine?: InLine | undefined;
}

/** "you are next in line", "you are 3 of 4 in line". */
function inLineWords(l: InLine): string {
  return l.position <= 1 ? vscode.l10n.t('you are next in line') : vscode.l10n.t('you are {0} of {1} in line', l.position, l.waiting);
}

/** "reserved by alice until 16:00", "reserved by you until 16:00", "reservation of alice ended at 16:00". */
function reservedWords(user: string, r: ReservationInfo): string {
  const until = endOf(r.until);
  if (r.ended) return vscode.l10n.t('reservation of {0} ended at {1}', user, until);
  return r.mine === true ? vscode.l10n.t('reserved by you until {0}', until) : vscode.l10n.t('reserved by {0} until {1}', user, until);
}

/** The look of a reservation that lasts: the user's own, or another's. */
function reservationLook(e: LockInfo | undefined): Look | undefined {
  if (e?.state !== 'held' || e.reservation === undefined) return undefined;
  return e.reservation.mine === true ? MY_RESERVATION : RESERVED;
}

export class BuildNode extends AreaRow<StaticDirNode | FolderNode> {
  readonly kind = 'build';

  /** The row's words: never anything that changes with the passing of time. */
  static description(r: AreaRecord, own: Ownership, showUsage: boolean): string {
    const parts: string[] = [];
    const e = r.lock;
    if (r.damaged !== undefined) parts.push(vscode.l10n.t('damaged'));
    if (own.staging !== undefined) {
      parts.push(own.staging.fraction !== undefined ? vscode.l10n.t('held by you · staging {0}%', Math.floor(own.staging.fraction * 100)) : vscode.l10n.t('held by you · staging'));
    } else if (own.mine) {
      parts.push(vscode.l10n.t('held by you'));
    } else if (own.inLine !== undefined) {
      parts.push(inLineWords(own.inLine));
    }
    if (own.staging === undefined && !own.mine && e !== undefined) {
      switch (e.state) {
        case 'free':
          break;
        case 'held':
          if (e.reservation !== undefined && e.holder !== undefined) parts.push(reservedWords(e.holder.user, e.reservation));
          else parts.push(e.holder !== undefined ? `${e.holder.user}@${e.holder.hostname}` : vscode.l10n.t('held'));
          if (e.reservation !== undefined && e.holder?.purpose !== undefined) parts.push(e.holder.purpose);
          break;
        case 'stale':
          parts.push(e.holder !== undefined ? vscode.l10n.t('stale · {0}@{1}', e.holder.user, e.holder.hostname) : vscode.l10n.t('stale'));
          break;
        case 'legacy':
          parts.push(e.legacy !== undefined ? vscode.l10n.t('legacy lock · {0}', e.legacy.hostname) : vscode.l10n.t('legacy lock'));
          break;
      }
    }
    if (showUsage && r.usage !== undefined) parts.push(`${formatBytes(r.usage.bytes)} · ${new Date(r.usage.lastUsedMs).toLocaleDateString()}`);
    return parts.join(' · ');
  }

  toTreeItem(r: AreaRecord, own: Ownership, showUsage: boolean): vscode.TreeItem {
    const state = r.lock?.state ?? 'free';
    const look = own.staging !== undefined ? STAGING : own.mine ? MINE : r.damaged !== undefined ? DAMAGED : (reservationLook(r.lock) ?? LOOKS[state]);
    const item = new vscode.TreeItem(rowText(this.name), vscode.TreeItemCollapsibleState.Collapsed);
    item.id = this.id;
    item.description = rowText(BuildNode.description(r, own, showUsage));
    item.iconPath = new vscode.ThemeIcon(look.icon, look.color !== undefined ? new vscode.ThemeColor(look.color) : undefined);
    // This window knows its own locks before the lock's file event comes: mine is held.
    const reserved = r.lock?.state === 'held' && r.lock.reservation !== undefined ? (r.lock.reservation.mine === true ? '.myReservation' : '.reserved') : '';
    const context = own.mine ? 'build.held.mine' : `build.${state}${reserved}`;
    item.contextValue = r.damaged !== undefined ? `${context}.damaged` : context;
    // No resourceUri: a build is not a file to decorate, and a URI per row costs thousands of
    // rows in a big folder real time in the workbench. The accessible label is VS Code's own:
    // the name, then the description, as on screen.
    // The tooltip is filled in on hover (resolveTreeItem), when its ages are current.
    return item;
  }

  /** The tooltip, from `entry` (a judgement fresher than the listing's, on hover) where given. */
  static tooltip(r: AreaRecord, own: Ownership, contents: { artifacts: number; bytes: number } | undefined, entry: LockInfo | undefined, last?: LastHeld, now = Date.now()): vscode.MarkdownString {
    const e = entry ?? r.lock;
    const state = e?.state ?? 'free';
    const look = own.mine ? MINE : (reservationLook(e) ?? LOOKS[state]);
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**${literal(r.tag)}** — $(${look.icon}) ${look.label}\n\n`);
    const rows: [string, string][] = [];
    if (r.damaged !== undefined) rows.push([vscode.l10n.t('Damaged'), r.damaged]);
    const h = e?.holder;
    const reservation = e?.reservation;
    if (h !== undefined && state !== 'free' && reservation !== undefined) {
      const until = new Date(Date.parse(reservation.until)).toLocaleString();
      // The heading says "reserved by you" already: the row says by whom and until when, once.
      if (reservation.ended) rows.push([vscode.l10n.t('Reservation'), `${reservedWords(h.user, reservation)} (${until})`]);
      else rows.push([vscode.l10n.t('Reserved by'), vscode.l10n.t('{0} until {1}', reservation.mine === true ? vscode.l10n.t('you') : h.user, until)]);
      rows.push([vscode.l10n.t('Host'), h.hostname]);
      if (h.purpose !== undefined) rows.push([vscode.l10n.t('Note'), h.purpose]);
      if (h.fence !== undefined) rows.push([vscode.l10n.t('Fencing token'), String(h.fence)]);
    } else if (h !== undefined && state !== 'free') {
      rows.push([vscode.l10n.t('Holder'), `${h.user}@${h.hostname}, pid ${h.pid}`]);
      rows.push([vscode.l10n.t('Client'), h.clientId]);
      if (h.purpose !== undefined) rows.push([vscode.l10n.t('Purpose'), h.purpose]);
      const acquired = Date.parse(h.acquiredAt);
      if (!Number.isNaN(acquired)) rows.push([vscode.l10n.t('Acquired'), `${new Date(acquired).toLocaleString()} (${formatAge(now - acquired)})`]);
      if (h.fence !== undefined) rows.push([vscode.l10n.t('Fencing token'), String(h.fence)]);
    }
    if (e?.unreadable !== undefined) rows.push([vscode.l10n.t('Holder'), e.unreadable]);
    if (e?.legacy !== undefined) {
      rows.push([vscode.l10n.t('Holder'), vscode.l10n.t('Python devserver on {0}', e.legacy.hostname) + (e.legacy.pid !== undefined ? `, pid ${e.legacy.pid}` : '')]);
    }
    // The Python devserver's lock has no heartbeat: its file's age is when it was taken.
    if (e?.heartbeatAgeMs !== undefined && state === 'legacy') rows.push([vscode.l10n.t('Taken'), vscode.l10n.t('{0} ago', formatAge(e.heartbeatAgeMs))]);
    else if (e?.heartbeatAgeMs !== undefined && state !== 'free' && reservation === undefined) rows.push([vscode.l10n.t('Heartbeat'), vscode.l10n.t('{0} ago', formatAge(e.heartbeatAgeMs))]);
    if (own.inLine !== undefined && !own.mine) rows.push([vscode.l10n.t('This window'), inLineWords(own.inLine)]);
    if (e?.holderAlive !== undefined) rows.push([vscode.l10n.t('Process'), e.holderAlive ? vscode.l10n.t('running') : vscode.l10n.t('gone')]);
    if (e?.staleReason !== undefined) rows.push([vscode.l10n.t('Why stale'), e.staleReason]);
    if (contents !== undefined) rows.push([vscode.l10n.t('Contents'), vscode.l10n.t('{0} artifacts, {1}', formatCount(contents.artifacts), formatBytes(contents.bytes))]);
    if (r.usage !== undefined) rows.push([vscode.l10n.t('Last used'), new Date(r.usage.lastUsedMs).toLocaleString()]);
    if (last !== undefined && state === 'free') {
      const who = `${last.holder.user ?? '?'}@${last.holder.hostname ?? '?'}`;
      const ended = Date.parse(last.endedAt);
      const ago = Number.isNaN(ended) ? '' : vscode.l10n.t(', {0} ago', formatAge(Math.max(0, now - ended)));
      rows.push([vscode.l10n.t('Last held'), last.heldMs !== undefined ? vscode.l10n.t('by {0} for {1} ({2}{3})', who, formatAge(last.heldMs), last.kind, ago) : vscode.l10n.t('by {0} ({1}{2})', who, last.kind, ago)]);
    }
    for (const [k, v] of rows) md.appendMarkdown(`${literal(k)}: ${literal(v)}  \n`);
    md.appendMarkdown('\n');
    md.appendCodeblock(e?.dir ?? `${r.staticDir}/${r.tag}`, 'text');
    return md;
  }
}

