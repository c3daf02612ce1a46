/**
 * The descriptor calls of the anchored operations, each as a synchronous and an asynchronous twin:
 * local filesystems take the synchronous path (io.ts), network ones the thread pool.
 */
import * as fs from 'fs';

/** A synchronous call as a settled promise: local filesystems take the synchronous path (io.ts). */
export function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
}

export function fstat(fd: number, sync = false): Promise<fs.Stats> {
  if (sync) return settle(() => fs.fstatSync(fd));
  return new Promise((resolve, reject) => fs.fstat(fd, (err, st) => (err === null ? resolve(st) : reject(err))));
}

/** The descriptor calls of an append, synchronous or through the thread pool. */
export interface FdCalls {
  open(p: string, flags: number, mode: number): Promise<number>;
  fstat(fd: number): Promise<fs.Stats>;
  write(fd: number, data: Buffer): Promise<number>;
  fchmod(fd: number, mode: number): Promise<void>;
  read(fd: number, buf: Buffer, offset: number, length: number, position: number): Promise<number>;
  futimes(fd: number, atime: Date, mtime: Date): Promise<void>;
  /** Settles once the descriptor is closed: on a FUSE or NFS client, that is when written data reaches the server. */
  close(fd: number): Promise<void>;
}

export const syncFd: FdCalls = {
  open: (p, flags, mode) => settle(() => fs.openSync(p, flags, mode)),
  fstat: (fd) => settle(() => fs.fstatSync(fd)),
  write: (fd, data) => settle(() => fs.writeSync(fd, data)),
  fchmod: (fd, mode) => settle(() => fs.fchmodSync(fd, mode)),
  read: (fd, buf, offset, length, position) => settle(() => fs.readSync(fd, buf, offset, length, position)),
  futimes: (fd, atime, mtime) => settle(() => fs.futimesSync(fd, atime, mtime)),
  close: (fd) => settle(() => fs.closeSync(fd)),
};

export const asyncFd: FdCalls = {
  open: (p, flags, mode) => new Promise((resolve, reject) => fs.open(p, flags, mode, (err, fd) => (err === null ? resolve(fd) : reject(err)))),
  fstat: (fd) => fstat(fd),
  write: (fd, data) => new Promise((resolve, reject) => fs.write(fd, data, (err, n) => (err === null ? resolve(n) : reject(err)))),
  fchmod: (fd, mode) => new Promise((resolve, reject) => fs.fchmod(fd, mode, (err) => (err === null ? resolve() : reject(err)))),
  read: (fd, buf, offset, length, position) =>
    new Promise((resolve, reject) => fs.read(fd, buf, offset, length, position, (err, n) => (err === null ? resolve(n) : reject(err)))),
  futimes: (fd, atime, mtime) => new Promise((resolve, reject) => fs.futimes(fd, atime, mtime, (err) => (err === null ? resolve() : reject(err)))),
  close: (fd) => new Promise((resolve) => fs.close(fd, () => resolve())),
};
