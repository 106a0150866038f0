// What the phone does when the relay says a caller's credential was revoked
// (notifications/phonebridge/credential_revoked, docs/PROTOCOL.md). One dispatch point: every
// consequence of a revocation on the phone starts here.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import * as z from 'zod';
import { CREDENTIAL_REVOKED_METHOD } from '../../protocol/caller.ts';
import type { PhoneControl } from './control.ts';
import type { PhoneTasks } from './tasks.ts';

export { CREDENTIAL_REVOKED_METHOD };

const CredentialRevoked = z.object({
  method: z.literal(CREDENTIAL_REVOKED_METHOD),
  params: z.object({ credential: z.string().min(1) }).passthrough(),
});

/** Everything a revoked credential held on this phone ends: its leases, its tasks. Idempotent (delivery is at least once). */
export function onCredentialRevoked(control: PhoneControl, tasks: PhoneTasks, credential: string): void {
  control.releaseHeldBy(credential);
  tasks.cancelCredential(credential);
}

/** The SDK keeps one handler per notification method: this is the only one for this method. */
export function handleCredentialRevoked(mcp: McpServer, control: PhoneControl, tasks: PhoneTasks): void {
  mcp.server.setNotificationHandler(CredentialRevoked, (n) => onCredentialRevoked(control, tasks, n.params.credential));
}
