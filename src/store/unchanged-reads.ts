import type SQLite from 'better-sqlite3';

/** Values kept at most; past it they are all dropped (a change to the database drops them anyway). */
const MAX_KEPT = 10_000;

/**
 * Reads of one SQLite connection, answered from memory while the database is unchanged since they
 * were made. "Unchanged" is SQLite's own account, checked on every get in the same read
 * transaction as the read it may replace: `PRAGMA data_version` (bumped by any commit of any other
 * connection, in any process) and `total_changes()` (every row this connection inserted, updated
 * or deleted, triggers included). So a kept value is never staler than a read made now; any write
 * anywhere drops them all. The check costs about half a point read (it takes the same WAL read lock),
 * which a hit saves together with the read's values and whatever the caller derives from them.
 *
 * `read(a, b)` gives the value for `key` (undefined: none, kept as nothing). Values for which
 * `keep` says no are returned but not kept.
 */
export class UnchangedReads<V> {
  private readonly kept = new Map<string, V>();
  private version = -1;
  private changes = -1;
  private readonly begin: SQLite.Statement;
  private readonly commit: SQLite.Statement;
  private readonly dataVersion: SQLite.Statement<[], number>;
  private readonly totalChanges: SQLite.Statement<[], number>;

  constructor(
    private readonly conn: SQLite.Database,
    private readonly read: (a: string, b: string) => V | undefined,
    private readonly keep: (value: V) => boolean,
  ) {
    this.begin = conn.prepare('BEGIN');
    this.commit = conn.prepare('COMMIT');
    this.dataVersion = conn.prepare<[], number>('PRAGMA data_version').pluck();
    this.totalChanges = conn.prepare<[], number>('SELECT total_changes()').pluck();
  }

  /**
   * `key`'s value (`key` must name `a` and `b` alone), kept or read now; null while the connection
   * is in a transaction (its uncommitted rows are not for others to see: read through Kysely).
   */
  get(key: string, a: string, b: string): V | undefined | null {
    if (this.conn.inTransaction) return null;
    this.begin.run();
    try {
      const version = this.dataVersion.get()!;
      const changes = this.totalChanges.get()!;
      if (version !== this.version || changes !== this.changes) {
        this.kept.clear();
        this.version = version;
        this.changes = changes;
      } else {
        const hit = this.kept.get(key);
        if (hit !== undefined) return hit;
      }
      const value = this.read(a, b);
      if (value !== undefined && this.keep(value)) {
        if (this.kept.size >= MAX_KEPT) this.kept.clear();
        this.kept.set(key, value);
      }
      return value;
    } finally {
      // A failed statement may have ended the transaction already (SQLite rolls back on some errors).
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- BEGIN above changed it
      if (this.conn.inTransaction) this.commit.run();
    }
  }
}
