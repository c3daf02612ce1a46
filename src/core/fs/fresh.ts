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

/**
 * Makes and removes a directory in `dir` (a path, its bytes, or a descriptor's
 * `/proc/self/fd/<n>`), so that the next look at it is answered by the file server. Named as the
 * protocol's own, so that listings and views pass it by (and one left by a killed process too).
 * Best effort: where it cannot write there, the next look may still be the client's.
 */
export async function dropCachedListing(dir: string | Buffer): Promise<void> {
  // A name that is not UTF-8 is given as its bytes (base/rawNames.ts).
  const name = `/${META_DIR}.probe.${process.pid}.${randomHex(4)}`;
  const probe = typeof dir === 'string' ? `${dir}${name}` : Buffer.concat([dir, Buffer.from(name)]);
  await fs.promises.mkdir(probe).then(
    () => fs.promises.rmdir(probe).catch(() => undefined),
    () => undefined,
  );
}
