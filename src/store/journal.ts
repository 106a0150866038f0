// The invalidation journal's insert, shared by the core, fleet and hosted stores: callers pass their
// transaction, so the event commits with the change it announces (src/store/types.ts ControlEvent).
import type { Kysely } from 'kysely';
import type { DB } from './schema.ts';
import type { ControlEvent } from './types.ts';

export async function journal(trx: Kysely<DB>, event: ControlEvent): Promise<void> {
  await trx
    .insertInto('control_events')
    .values({ event: JSON.stringify(event) })
    .execute();
}
