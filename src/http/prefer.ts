/**
 * The preferences of a `Prefer` request header (RFC 7240) the API reads: `wait`, how many seconds
 * the client is willing to wait for the final answer, and `existing-entity`, that a DUPLICATE should
 * name the existing entity when it is the client's. Preferences are hints: one the server cannot
 * read is ignored, never an error, and the first `wait` of the header counts (RFC 7240, section 2).
 */

/** The seconds a `Prefer` header asks to wait, or undefined when it asks for none (or says it unreadably). */
export function preferredWaitSeconds(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const preferences = (Array.isArray(header) ? header.join(',') : header).split(',');
  for (const preference of preferences) {
    // A preference's own parameters follow its first `;`.
    const [name = '', value] = (preference.split(';')[0] ?? '').split('=', 2).map((part) => part.trim());
    if (name.toLowerCase() !== 'wait') continue;
    const seconds = /^"?(\d{1,9})"?$/.exec(value ?? '')?.[1];
    return seconds === undefined ? undefined : Number(seconds);
  }
  return undefined;
}

/** Whether a `Prefer` header asks a DUPLICATE to name the existing entity (`Prefer: existing-entity`). */
export function prefersExistingEntity(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  return (Array.isArray(header) ? header.join(',') : header)
    .split(',')
    .some((preference) => (preference.split(';')[0] ?? '').split('=', 1)[0]!.trim().toLowerCase() === 'existing-entity');
}
