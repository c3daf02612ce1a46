/** A reservation's end as the view shows it, free of vscode. */

/** "4:00 PM": the end of a reservation as this machine's clock face shows it (a time, never compared with this clock). */
export function endOf(until: string): string {
  const t = Date.parse(until);
  return Number.isNaN(t) ? '?' : new Date(t).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
}
