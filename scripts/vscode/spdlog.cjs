// Takes the place of @vscode/spdlog's index.js in the headless VS Code, whose native part is not
// compiled there (see installVsCodeServer in headless.mjs). Without it VS Code keeps every log
// line in memory and writes no log file, so the Output view shows nothing for a log channel: the
// extension's own log included. This writes the same lines, in the same format, synchronously.
//
// It covers what VS Code calls: setFlushOn, createAsyncRotatingLogger (and the other creators),
// and a logger's level methods, getLevel/setLevel, setPattern/clearFormatters, flush and drop.
'use strict';
const fs = require('fs');
const path = require('path');

/** spdlog's levels, in its order; VS Code's log parser reads these names between brackets. */
const LEVELS = ['trace', 'debug', 'info', 'warning', 'error', 'critical', 'off'];
const LogLevel = { Trace: 0, Debug: 1, Info: 2, Warning: 3, Error: 4, Critical: 5, Off: 6 };

let defaultLevel = LogLevel.Info;

const pad = (n, width = 2) => String(n).padStart(width, '0');

/** spdlog's default pattern as VS Code sets it, "%Y-%m-%d %H:%M:%S.%e [%l] %v", in local time. */
function stamp(d) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

class Logger {
  constructor(loggerType, name, filename, filesize, filecount) {
    this.name = name;
    this.filename = filename;
    this.filesize = filesize > 0 ? filesize : Infinity;
    this.filecount = loggerType === 'stdout_async' ? 0 : Math.max(0, filecount | 0);
    this.level = defaultLevel;
    this.formatted = true;
    this.fd = loggerType === 'stdout_async' ? 1 : fs.openSync(filename, 'a');
    this.size = this.fd === 1 ? 0 : fs.fstatSync(this.fd).size;
  }

  write(level, message) {
    if (this.fd < 0 || level < this.level || this.level >= LogLevel.Off) return;
    const line = `${this.formatted ? `${stamp(new Date())} [${LEVELS[level]}] ` : ''}${message}\n`;
    const bytes = Buffer.byteLength(line);
    if (this.fd !== 1 && this.size > 0 && this.size + bytes > this.filesize) this.rotate();
    fs.writeSync(this.fd, line);
    this.size += bytes;
  }

  /** As spdlog's rotating file sink: name.log becomes name.1.log, name.1.log name.2.log, and so on. */
  rotate() {
    fs.closeSync(this.fd);
    const { dir, name, ext } = path.parse(this.filename);
    const nth = (i) => (i === 0 ? this.filename : path.join(dir, `${name}.${i}${ext}`));
    for (let i = this.filecount; i > 0; i--) {
      try {
        fs.renameSync(nth(i - 1), nth(i));
      } catch {
        // Not there yet: fewer files than the count so far.
      }
    }
    // With no backups to keep, the one file starts again from empty.
    this.fd = fs.openSync(this.filename, this.filecount > 0 ? 'a' : 'w');
    this.size = fs.fstatSync(this.fd).size;
  }

  trace(message) { this.write(LogLevel.Trace, message); }
  debug(message) { this.write(LogLevel.Debug, message); }
  info(message) { this.write(LogLevel.Info, message); }
  warn(message) { this.write(LogLevel.Warning, message); }
  error(message) { this.write(LogLevel.Error, message); }
  critical(message) { this.write(LogLevel.Critical, message); }
  getLevel() { return this.level; }
  setLevel(level) { this.level = level; }
  setPattern() { this.formatted = true; }
  clearFormatters() { this.formatted = false; }
  /** Every line is written as it comes: nothing waits to be flushed. */
  flush() {}
  drop() {
    if (this.fd > 1) fs.closeSync(this.fd);
    this.fd = -1;
  }
}

async function createLogger(loggerType, name, filename, filesize, filecount) {
  await fs.promises.mkdir(path.dirname(filename), { recursive: true });
  return new Logger(loggerType, name, filename, filesize, filecount);
}

exports.version = 0;
exports.LogLevel = LogLevel;
exports.Logger = Logger;
exports.setLevel = (level) => {
  defaultLevel = level;
};
// Lines are written synchronously, so each is on disk however the flush level is set.
exports.setFlushOn = () => {};
exports.createRotatingLogger = (name, filename, filesize, filecount) => createLogger('rotating', name, filename, filesize, filecount);
exports.createAsyncRotatingLogger = (name, filename, filesize, filecount) => createLogger('rotating_async', name, filename, filesize, filecount);
