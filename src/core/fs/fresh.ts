/**
 * Reading a directory past a network client's cache. An sshfs or NFS client answers a listing
 * from what it fetched earlier (sshfs for 20 s), so a name another host made since is missing
 * from it, and reading again gives the same answer. The client drops what it knows of a directory
 * when it changes that directory itself: making and removing an entry there through the same
 * client makes the next listing the server's.
 */
import * as fs from 'fs';
import { randomHex } from '../base/crypto';
import { META_DIR } from '../base/protocol';
import { decodeName } from '../base/rawNames';
import { isWithin } from './anchored';

/**
 * Makes and removes a directory in `dir` (a path, its bytes, or a descriptor's
 * `/proc/self/fd/<n>`), so that the next look at it is answered by the file server. `name`: the
 * probe's own, by default named as the protocol's (listings and views pass it by, and one left by
 * a killed process too); a record that clears its own litter names its probes its way. Best
 * effort: where it cannot write there, the next look may still be the client's (false).
 */
export async function dropCachedListing(dir: string | Buffer, name = `${META_DIR}.probe.${process.pid}.${randomHex(4)}`): Promise<boolean> {
  // A name that is not UTF-8 is given as its bytes (base/rawNames.ts).
  const probe = typeof dir === 'string' ? `${dir}/${name}` : Buffer.concat([dir, Buffer.from(`/${name}`)]);
  const made = await fs.promises.mkdir(probe).then(
    () => true,
    () => false,
  );
  if (made) await fs.promises.rmdir(probe).catch(() => undefined);
  return made;
}

/**
 * `dropCachedListing` for the directory at the path `dir`, only where it is the directory inside
 * `realRoot` it was seen to be: opened without following a link in its place, and judged by where
 * the kernel placed what it opened. A path another user exchanged with a link to elsewhere (a walk
 * goes by paths) never gets a probe made outside.
 */
export async function dropCachedListingInside(dir: string | Buffer, realRoot: string): Promise<void> {
  const fh = await openInside(dir, realRoot);
  if (fh === undefined) return;
  try {
    await dropCachedListing(`/proc/self/fd/${fh.fd}`);
  } finally {
    await fh.close();
  }
}

/** Opens the directory at the path `dir` without following a link in its place, if the kernel places it inside `realRoot`. */
async function openInside(dir: string | Buffer, realRoot: string): Promise<fs.promises.FileHandle | undefined> {
  const fh = await fs.promises.open(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW).catch(() => undefined);
  if (fh === undefined) return undefined;
  const real = await fs.promises.readlink(`/proc/self/fd/${fh.fd}`, { encoding: 'buffer' }).then(decodeName, () => undefined);
  if (real !== undefined && isWithin(realRoot, real)) return fh;
  await fh.close();
  return undefined;
}

/**
 * What the file `name` in the directory `dir` (inside `realRoot`) is now, as the file server says.
 * A network client answers `lstat` and even `fstat` of a name from what it fetched earlier (sshfs
 * keeps a name's attributes for 20 s, however the file changed through another host), but has
 * nothing cached for a name new to it: the file is looked at through a hard link made for the
 * purpose beside it, then unlinked, all through the directory opened as above. Where no link can
 * be made (a filesystem without hard links, another user's file where the kernel protects them),
 * the name's own `lstat`, which may be the client's. Undefined where nothing is there, or the
 * directory is not where it was seen.
 */
export async function freshStat(dir: string, name: string, realRoot: string): Promise<fs.Stats | undefined> {
  const fh = await openInside(dir, realRoot);
  if (fh === undefined) return undefined;
  try {
    const at = `/proc/self/fd/${fh.fd}`;
    const probe = `${at}/${META_DIR}.probe.${process.pid}.${randomHex(4)}`;
    const linked = await fs.promises.link(`${at}/${name}`, probe).then(
      () => true,
      () => false,
    );
    try {
      return await fs.promises.lstat(linked ? probe : `${at}/${name}`);
    } catch {
      return undefined;
    } finally {
      if (linked) await fs.promises.unlink(probe).catch(() => undefined);
    }
  } finally {
    await fh.close();
  }
}
