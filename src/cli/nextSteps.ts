/**
 * The core's next steps as a terminal user takes them: with the tool's flags and commands. The
 * core words them without (`nextStepWords`); this is the one place that names them.
 */
import { nextStepWords, type NextStep } from '../core/base/errors';
import { printable } from '../core/base/format';

/** `TAG` where the core did not know the build. */
const tagOf = (tag: string | undefined): string => (tag !== undefined ? printable(tag) : 'TAG');

function stepText(step: NextStep): string {
  switch (step.kind) {
    case 'wait':
      return 'wait for it to be released (--wait)';
    case 'join-line':
      return 'wait for it too (--wait) to take a place in line';
    case 'force-release':
      return `force-release it if its holder is gone (devserver-stage force-release ${tagOf(step.tag)})`;
    case 'add':
      return `to record its artifacts, stage its sources again with \`devserver-stage stage --add ${tagOf(step.tag)} SOURCE...\` (files already there are hashed and recorded)`;
    case 'repair-manifest': {
      const file = printable(step.file);
      return (
        `to repair it, move it aside (mv '${file}' '${file}.damaged') and stage the build's sources again with \`devserver-stage stage --add ${tagOf(step.tag)} SOURCE...\` ` +
        '(files already there are hashed again and recorded; add --overwrite where they differ)'
      );
    }
    case 'destroy':
      return `remove the area with \`devserver-stage destroy ${tagOf(step.tag)}\` and stage it anew`;
    case 'verify':
      return `verify the build with \`devserver-stage verify ${tagOf(step.tag)}\`, which reads the manifest in full`;
    case 'free-space':
      return 'free some space (devserver-stage du, devserver-stage prune) or stage onto a larger filesystem';
    case 'raise-size-limit':
      return 'raise the size limit (--max-size) if the build really is that large';
    case 'give-static-dir':
      return 'pass --static-dir DIR or set DEVSERVER_STATIC_DIR';
    case 'give-duration':
      return `pass --for with a unit, such as --for 90m, --for 4h or --for 1d (at most ${step.maxDays}d)`;
    case 'reserve-again':
      return `reserve it anew (devserver-stage reserve ${tagOf(step.tag)} --for DURATION)`;
    case 'ask-owner':
      return `ask its owner to release it (devserver-stage release ${tagOf(step.tag)}), or force-release it (devserver-stage force-release ${tagOf(step.tag)})`;
  }
}

/** The next steps as one sentence for a terminal: "Wait for it to be released (--wait), or force-release it …". */
export function nextStepText(next: readonly NextStep[]): string {
  return nextStepWords(next, stepText);
}

/** An error's message as the tool prints it: its facts, then its next steps in the tool's words. */
export function cliMessage(err: { message: string; facts?: unknown; next?: readonly NextStep[] }): string {
  if (err.next === undefined || err.next.length === 0 || typeof err.facts !== 'string') return err.message;
  return `${err.facts} ${nextStepText(err.next)}`;
}
