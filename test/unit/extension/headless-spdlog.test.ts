/**
 * The stand-in for @vscode/spdlog that the headless VS Code loads (scripts/vscode/spdlog.cjs):
 * VS Code's log files, the extension's Output channel among them, are written through it. Its lines
 * must be what VS Code's log view parses (`2026-01-02 03:04:05.678 [info] text`), below the level
 * nothing, and a full file must rotate into numbered ones as spdlog's rotating sink does.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { cleanup, ROOT, tempDir } from '../../helpers';

interface Logger {
  trace(m: string): void;
  debug(m: string): void;
  info(m: string): void;
  warn(m: string): void;
  error(m: string): void;
  critical(m: string): void;
  getLevel(): number;
  setLevel(level: number): void;
  setPattern(p: string): void;
  clearFormatters(): void;
  flush(): void;
  drop(): void;
}
interface Spdlog {
  setFlushOn(level: number): void;
  createAsyncRotatingLogger(name: string, file: string, size: number, count: number): Promise<Logger>;
}

const spdlog = require(path.join(ROOT, 'scripts', 'vscode', 'spdlog.cjs')) as Spdlog;

/** VS Code's own pattern for a log line (its log view finds levels and times with it). */
const LINE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} \[(trace|debug|info|warning|error|critical)\] (.*)$/;

describe('the spdlog stand-in of the headless VS Code', () => {
  let dir = '';
  beforeEach(() => (dir = tempDir('dss-spdlog-')));
  afterEach(() => cleanup(dir));

  const lines = (file: string): string[] => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);

  it('writes formatted lines at once, into a folder it creates, and none below the level', async () => {
    const file = path.join(dir, 'logs', 'exthost1', 'Devserver Staging.log');
    spdlog.setFlushOn(0);
    const log = await spdlog.createAsyncRotatingLogger('test', file, 5 * 1024 * 1024, 6);
    log.setPattern('%Y-%m-%d %H:%M:%S.%e [%l] %v');
    log.setLevel(2);
    assert.equal(log.getLevel(), 2);
    log.trace('not this');
    log.debug('nor this');
    log.info('Activated with 1 static directory.');
    log.warn('careful');
    log.error('failed: EACCES');
    log.critical('down');
    // No flush: VS Code reads the file while the logger is open.
    const got = lines(file).map((l) => {
      const m = LINE.exec(l);
      assert.ok(m, `not a log line VS Code parses: ${l}`);
      return `${m[1]} ${m[2]}`;
    });
    assert.deepEqual(got, ['info Activated with 1 static directory.', 'warning careful', 'error failed: EACCES', 'critical down']);
    const stamp = LINE.exec(lines(file)[0])![0].slice(0, 23);
    assert.ok(Math.abs(new Date(stamp.replace(' ', 'T')).getTime() - Date.now()) < 60_000, `the time is local and now: ${stamp}`);
    log.drop();
    log.info('after drop');
    assert.equal(lines(file).length, 4);
  });

  it('writes messages alone once its formatters are cleared, and nothing at level off', async () => {
    const file = path.join(dir, 'plain.log');
    const log = await spdlog.createAsyncRotatingLogger('plain', file, 1024, 1);
    log.setLevel(0);
    log.clearFormatters();
    log.trace('a raw line');
    log.setLevel(6);
    log.critical('not even this');
    log.drop();
    assert.deepEqual(lines(file), ['a raw line']);
  });

  it('appends to a file already there', async () => {
    const file = path.join(dir, 'again.log');
    fs.writeFileSync(file, 'from before\n');
    const log = await spdlog.createAsyncRotatingLogger('again', file, 1024, 1);
    log.setLevel(2);
    log.clearFormatters();
    log.info('now');
    log.drop();
    assert.deepEqual(lines(file), ['from before', 'now']);
  });

  it('rotates a full file into numbered ones and keeps only as many as asked', async () => {
    const file = path.join(dir, 'big.log');
    const log = await spdlog.createAsyncRotatingLogger('big', file, 100, 2);
    log.setLevel(0);
    log.clearFormatters();
    // Each message is 40 bytes with its newline: two fit in 100 bytes, a third rotates.
    for (let i = 0; i < 9; i++) log.info(`${String(i).padStart(2, '0')} ${'x'.repeat(36)}`);
    log.drop();
    assert.deepEqual(fs.readdirSync(dir).sort(), ['big.1.log', 'big.2.log', 'big.log']);
    const first = (f: string): string[] => lines(path.join(dir, f)).map((l) => l.slice(0, 2));
    // 00 01 | 02 03 | 04 05 | 06 07 | 08: the two oldest files are gone.
    assert.deepEqual(first('big.log'), ['08']);
    assert.deepEqual(first('big.1.log'), ['06', '07']);
    assert.deepEqual(first('big.2.log'), ['04', '05']);
    for (const f of fs.readdirSync(dir)) assert.ok(fs.statSync(path.join(dir, f)).size <= 100, `${f} is over its size`);
  });
});
