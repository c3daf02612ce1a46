/**
 * `watch --exec CMD`: CMD run once per event, one at a time, with the event in its environment.
 * CMD is the user's text alone, split into words here (quotes group, nothing is expanded) and run
 * without a shell: what co-users wrote (holders, notes, tags) reaches the command only as
 * environment values, which no program runs unless the user's own command says to. The events
 * wait in order for the command before; a command slower than the events makes the oldest waiting
 * ones dropped, each said on stderr, so the watch holds a fixed number however slow it is.
 */
import { type ChildProcess, spawn } from 'child_process';
import { hasRawBytes } from '../core/base/rawNames';
import { clip } from '../core/log/history/events';
import { jsonText, messageLine, printable } from './output';
import type { WatchActor, WatchLine } from './watchLines';

/** Events that may wait for the command before them; beyond this the oldest waiting is dropped. */
export const EXEC_QUEUE_MAX = 100;

/**
 * A co-user's field cut as the history cuts a purpose: the kernel refuses to start a command with
 * an environment string over 128 KiB (`E2BIG`), which a holder record of 64 KiB whose bytes are not
 * UTF-8 (three bytes each once decoded) passes, and `DSS_EVENT_JSON` holds several such fields.
 */
const cut = (a: WatchActor): WatchActor => ({ ...a, user: clip(a.user), host: clip(a.host), ...(a.purpose !== undefined ? { purpose: clip(a.purpose) } : {}) });

function cutLine(l: WatchLine): WatchLine {
  const out: WatchLine = { ...l };
  for (const k of ['holder', 'user', 'host', 'clientId', 'purpose', 'staleReason'] as const) if (out[k] !== undefined) out[k] = clip(out[k]);
  if (out.by !== undefined) out.by = cut(out.by);
  if (out.previous !== undefined) out.previous = cut(out.previous);
  return out;
}

function actorEnv(prefix: string, a: WatchActor | undefined): Record<string, string> {
  if (a === undefined) return {};
  return {
    [`${prefix}_USER`]: a.user,
    [`${prefix}_HOST`]: a.host,
    ...(a.pid !== undefined ? { [`${prefix}_PID`]: String(a.pid) } : {}),
    ...(a.purpose !== undefined ? { [`${prefix}_PURPOSE`]: a.purpose } : {}),
  };
}

/** The watch's own environment without `DSS_*`: a variable an event does not set is unset, never another event's. */
function ownEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DSS_')) env[k] = v;
  return env;
}

/**
 * The event as environment variables: `DSS_EVENT` (its kind), `DSS_TAG`, `DSS_STATIC_DIR`,
 * `DSS_STATE`, `DSS_HOLDER_*` (the holder now, else the one whose lock ended), `DSS_BY_*` (who
 * broke or destroyed it), `DSS_PREVIOUS_*`, `DSS_TOKEN`, `DSS_RESERVED_UNTIL`, `DSS_TIME`, and
 * the whole line as `DSS_EVENT_JSON`. NUL cannot be in an environment value: it is escaped. A
 * co-user's text longer than 500 characters is cut (`…`). A tag whose bytes are not UTF-8 is given
 * as `printable` shows it (`"eve/R\xff"`), which the command line takes back as that build.
 */
export function envOf(whole: WatchLine, staticDir: string): Record<string, string> {
  const line = cutLine(whole);
  const holder: WatchActor | undefined = line.user !== undefined || line.host !== undefined ? { user: line.user ?? '', host: line.host ?? '', ...(line.pid !== undefined ? { pid: line.pid } : {}), ...(line.purpose !== undefined ? { purpose: line.purpose } : {}) } : line.previous;
  const env: Record<string, string> = {
    DSS_EVENT: line.kind ?? line.event,
    // An environment value is UTF-8 text: a byte that is not UTF-8 would arrive as U+FFFD, naming another build (or none).
    DSS_TAG: hasRawBytes(line.tag ?? '') ? printable(line.tag ?? '') : (line.tag ?? ''),
    DSS_STATIC_DIR: staticDir,
    DSS_STATE: line.event === 'gone' ? 'gone' : (line.state ?? ''),
    DSS_TIME: line.time,
    ...actorEnv('DSS_HOLDER', holder),
    ...actorEnv('DSS_BY', line.by),
    ...actorEnv('DSS_PREVIOUS', line.previous),
    ...(line.token !== undefined ? { DSS_TOKEN: String(line.token) } : {}),
    ...(line.reservedUntil !== undefined ? { DSS_RESERVED_UNTIL: line.reservedUntil } : {}),
    DSS_EVENT_JSON: jsonText(line),
  };
  for (const k of Object.keys(env)) env[k] = env[k].replace(/\0/g, '\\0');
  return env;
}

/** The events on their way to the command, one run at a time. */
export class ExecQueue {
  private readonly waiting: WatchLine[] = [];
  private running: Promise<void> | undefined;
  /** The command running now. */
  private child: ChildProcess | undefined;
  private stopped = false;

  constructor(
    private readonly argv: readonly string[],
    private readonly staticDir: string,
    private readonly stderr: { write(text: string): unknown },
    private readonly max = EXEC_QUEUE_MAX,
    /** Where the commands' own output goes. */
    private readonly output: NodeJS.WritableStream = process.stderr,
  ) {}

  put(line: WatchLine): void {
    if (this.stopped) return;
    if (this.waiting.length >= this.max) {
      const dropped = this.waiting.shift()!;
      this.stderr.write(messageLine(`--exec is behind: the ${dropped.kind ?? dropped.event} event of ${printable(dropped.tag ?? '')} at ${dropped.time} was dropped (more than ${this.max} events waited for the command).`));
    }
    this.waiting.push(line);
    this.running ??= this.drain();
  }

  /** No more commands start; the running one, if any, is left to end on its own, unwaited for (a command that ignores signals must not keep the watch). */
  stop(): void {
    this.stopped = true;
    this.child?.unref();
    this.child?.stdout?.destroy();
    this.child?.stderr?.destroy();
    const left = this.waiting.length;
    this.waiting.length = 0;
    if (left > 0) this.stderr.write(messageLine(`--exec: ${left} event${left === 1 ? '' : 's'} left unrun as the watch stopped.`));
  }

  private async drain(): Promise<void> {
    for (let next = this.waiting.shift(); next !== undefined && !this.stopped; next = this.waiting.shift()) await this.run(next);
    this.running = undefined;
  }

  private run(line: WatchLine): Promise<void> {
    return new Promise((done) => {
      let ended = false;
      const resolve = (): void => {
        ended = true;
        done();
      };
      const what = `--exec ${printable(this.argv[0])} for the ${line.kind ?? line.event} event of ${printable(line.tag ?? '')}`;
      let child: ChildProcess;
      try {
        // Its output goes to stderr (stdout is the watch's lines, which a reader parses), through
        // pipes: a child given the watch's own descriptor would have the kernel's file description
        // made blocking for both, and a stderr nobody reads would then stop the watch in a write,
        // signals and all. Piped, a reader that falls behind holds up only the command.
        child = spawn(this.argv[0], this.argv.slice(1), { env: { ...ownEnv(), ...envOf(line, this.staticDir) }, stdio: ['ignore', 'pipe', 'pipe'], shell: false });
        child.stdout?.pipe(this.output, { end: false });
        child.stderr?.pipe(this.output, { end: false });
      } catch (err) {
        // Node throws what it does not report as an event (E2BIG from a large environment, say).
        this.stderr.write(messageLine(`${what} could not start: ${err instanceof Error ? err.message : String(err)}`));
        resolve();
        return;
      }
      this.child = child;
      child.once('error', (err) => {
        if (ended) return;
        this.stderr.write(messageLine(`${what} could not start: ${err.message}`));
        resolve();
      });
      child.once('exit', (code, signal) => {
        if (this.child === child) this.child = undefined;
        if (ended) return;
        if (code !== 0) this.stderr.write(messageLine(`${what} ${signal !== null ? `was ended by ${signal}` : `exited with status ${code}`}.`));
        resolve();
      });
    });
  }
}
