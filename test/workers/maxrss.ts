/**
 * Loaded with `node --require` before a command: as the process exits, writes its peak resident
 * memory (KiB, as getrusage says) to the file named by DSS_MAXRSS_FILE.
 */
import * as fs from 'fs';

const file = process.env.DSS_MAXRSS_FILE;
if (file !== undefined) process.on('exit', () => fs.writeFileSync(file, String(process.resourceUsage().maxRSS)));
