/** How long a reservation lasts, as the user picks it: the usual lengths, or one typed. */
import * as vscode from 'vscode';
import { isStagingError, reservationDuration } from '../../core';
import type { Prompts } from '../prompts';

const HOUR = 3_600_000;

/** The length picked, in ms; undefined when the user dismissed the question. */
export async function askReservationLength(prompts: Prompts, title: string): Promise<number | undefined> {
  const custom = { label: vscode.l10n.t('Custom…'), detail: vscode.l10n.t('A length with its unit, such as 90m, 2h or 3d (at most 30 days)') };
  const choices = [
    { label: vscode.l10n.t('1 hour'), ms: HOUR },
    { label: vscode.l10n.t('4 hours'), ms: 4 * HOUR },
    { label: vscode.l10n.t('1 day'), ms: 24 * HOUR },
    custom,
  ];
  const picked = await prompts.pickOne(choices, { title, placeHolder: vscode.l10n.t('For how long from now?') });
  if (picked === undefined) return undefined;
  if ('ms' in picked) return picked.ms;
  const text = await prompts.input({
    title,
    prompt: vscode.l10n.t('For how long from now? A number with its unit: 90m, 2h, 3d or 1d12h, at most 30 days.'),
    placeHolder: '2h',
    validateInput: (v) => lengthProblem(v),
  });
  return text === undefined ? undefined : reservationDuration(text);
}

/** Why a typed length is refused, in the core's words; undefined when it is one. */
function lengthProblem(text: string): string | undefined {
  try {
    reservationDuration(text);
    return undefined;
  } catch (err) {
    return isStagingError(err) ? err.message : String(err);
  }
}
