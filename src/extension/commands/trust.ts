/**
 * Which commands need a trusted workspace: package.json alone says it, with
 * `"enablement": "isWorkspaceTrusted"` on each command that changes what is on disk, which
 * disables its menu items, palette entry and keys. The command wrapper refuses the same commands
 * for callers that bypass those (`executeCommand`), reading the running extension's own
 * manifest: there is no second list to keep in step. Free of `vscode`, so it is tested as it is.
 */

/** `<publisher>.<name>` of package.json: how the wrapper finds its own manifest. */
export const EXTENSION_ID = 'devserver-staging.devserver-staging';

/** The `enablement` term that makes a command need trust. */
export const TRUSTED = 'isWorkspaceTrusted';

/**
 * The ids of the commands that `manifest` (a package.json's content) enables only in a trusted
 * workspace: those whose `enablement` requires `isWorkspaceTrusted` (alone, or with `&&`).
 * Undefined when it is not a manifest with commands: the caller then refuses every command.
 */
export function commandsNeedingTrust(manifest: unknown): ReadonlySet<string> | undefined {
  const commands = (manifest as { contributes?: { commands?: unknown } } | undefined)?.contributes?.commands;
  if (!Array.isArray(commands)) return undefined;
  const ids = new Set<string>();
  for (const c of commands as { command?: unknown; enablement?: unknown }[]) {
    if (typeof c?.command !== 'string' || typeof c.enablement !== 'string') continue;
    if (c.enablement.split('&&').some((term) => term.trim() === TRUSTED)) ids.add(c.command);
  }
  return ids;
}
