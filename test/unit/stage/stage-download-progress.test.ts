/**
 * Progress of a download as the server sent it: bytes received and the Content-Length, whatever
 * the body becomes (one file, a zip read after it arrived, a tar.gz unpacked as it streams in),
 * so that an editor can show a total and a percentage.
 */
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { stage } from '../../../src/core/stage/stage';
import type { StageProgress } from '../../../src/core/stage/types';
import { startServer, writeArchives, type TestServer } from '../../fixtures';
import { cleanup, tempDir } from '../../helpers';

describe('download progress', () => {
  let root: string;
  let server: TestServer;
  const bodies = new Map<string, Buffer>();

  before(async () => {
    root = tempDir('dss-dlprog-');
    const entries = [
      { name: 'a.bin', random: 300_000 },
      { name: 'b.bin', random: 200_000 },
    ];
    await writeArchives([
      { file: path.join(root, 'build.tar.gz'), kind: 'tar.gz', entries },
      { file: path.join(root, 'build.zip'), kind: 'zip', entries },
    ]);
    bodies.set('/build.tar.gz', fs.readFileSync(path.join(root, 'build.tar.gz')));
    bodies.set('/build.zip', fs.readFileSync(path.join(root, 'build.zip')));
    bodies.set('/image.bin', Buffer.alloc(500_000, 7));
    server = await startServer((req, res) => {
      const body = bodies.get(req.url!.replace(/\?.*$/, ''))!;
      // ?chunked: no Content-Length, as servers that stream do.
      res.writeHead(200, { 'content-type': 'application/octet-stream', ...(req.url!.endsWith('?chunked') ? {} : { 'content-length': body.length }) });
      // In pieces, so that progress has several chunks to report.
      let at = 0;
      const next = (): void => {
        if (at >= body.length) return void res.end();
        res.write(body.subarray(at, (at += 64 * 1024)), next);
      };
      next();
    });
  });

  after(async () => {
    await server.close();
    cleanup(root);
  });

  async function staged(url: string, tag: string): Promise<StageProgress[]> {
    const seen: StageProgress[] = [];
    const staticDir = path.join(root, 'static');
    fs.mkdirSync(staticDir, { recursive: true });
    await stage(staticDir, tag, [url], { onProgress: (p) => seen.push({ ...p }) });
    return seen;
  }

  for (const file of ['/image.bin', '/build.tar.gz', '/build.zip']) {
    it(`reports bytes received against the Content-Length for ${file.slice(1)}`, async () => {
      const length = bodies.get(file)!.length;
      const seen = await staged(`${server.base}${file}`, `dl/${file.replace(/\W/g, '')}`);
      const last = seen[seen.length - 1];
      assert.equal(last.downloadBytes, length);
      assert.equal(last.downloadTotal, length);
      const received = seen.map((p) => p.downloadBytes ?? 0);
      assert.deepEqual(received, [...received].sort((a, b) => a - b), 'never backwards');
    });
  }

  it('reports bytes received, and no total, when the server sends no Content-Length', async () => {
    const seen = await staged(`${server.base}/build.tar.gz?chunked`, 'dl/chunked');
    const last = seen[seen.length - 1];
    assert.equal(last.downloadBytes, bodies.get('/build.tar.gz')!.length);
    assert.equal(last.downloadTotal, undefined);
  });

  it('reports nothing of downloads for local sources', async () => {
    const seen = await staged(path.join(root, 'build.zip'), 'dl/local');
    assert.ok(seen.length > 0 && seen.every((p) => p.downloadBytes === undefined && p.downloadTotal === undefined));
  });
});
