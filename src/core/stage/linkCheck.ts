/**
 * The last check of a staging before its commit stands: every link of the area, followed through
 * the others as the kernel would, stays inside the area.
 */
import * as fs from 'fs';
import * as path from 'path';
import { StagingError, errnoCode } from '../base/errors';
import { resolveInside } from './names';
import type { Manifest } from './types';

/**
 * A link may lead out through other links, made now or earlier, even where its target does not
 * exist yet. So, with this call's artifacts in place, every link of the area is followed once
 * more, as the kernel would; one that would leave the area fails the staging (and undoes the
 * commit), whichever call made it.
 */
export async function checkLinks(dir: string, madeLinks: readonly string[], artifacts: Manifest['artifacts']): Promise<void> {
  const realDir = await fs.promises.realpath(dir);
  const links = new Set(madeLinks.map((l) => path.relative(dir, l).split(path.sep).join('/')));
  for (const entry of Object.values(artifacts)) if (entry.type === 'symlink') links.add(entry.name);
  for (const name of links) {
    const link = path.join(realDir, name);
    let target: string | undefined;
    try {
      target = await fs.promises.readlink(link);
    } catch (err) {
      const code = errnoCode(err);
      // Replaced by a file since, or gone: nothing to follow.
      if (code === 'ENOENT' || code === 'EINVAL') continue;
      // Unreadable (sshfs answers EPERM for a target with `..` or a leading `/`): then it is
      // followed as the manifest recorded it, and any link on its way must be readable.
      target = artifacts[name]?.linkTarget;
      if (target === undefined) throw new StagingError('EUNSAFE', `Refusing this staging: the link ${name} in the area cannot be read (${code ?? String(err)}), so where it leads cannot be checked.`, { path: link });
    }
    if ((await resolveInside(realDir, path.dirname(link), target)) === undefined) {
      const made = madeLinks.some((l) => path.relative(dir, l).split(path.sep).join('/') === name);
      throw new StagingError(
        'EUNSAFE',
        made
          ? `Refusing ${name} from this staging: followed through the links of the area, it leads outside it (or loops).`
          : `Refusing this staging: with it, the link ${name} already in the area would lead outside it (or loop).`,
        { path: link },
      );
    }
  }
}
