/**
 * A data dir the embedded store cannot use as given (its path leaves no room for the Unix
 * socket inside it): a setting to change, which the commands report as one line naming
 * --data-dir (exit 2, services/database-start-error.ts). Apart from embedded.ts so that
 * recognising it does not load PGlite.
 */
export class DataDirPathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DataDirPathError';
  }
}
