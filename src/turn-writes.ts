// Writes held to the end of a turn (docs/decisions/0050-one-write-per-answer.md). uWS 20.30
// corks one socket at a time: an answer written while another socket's callback runs (a phone
// frame, and the promise continuations uWS drains inside that callback) is not corked, and
// every piece of it becomes its own syscall. So responses, SSE events and phone frames are
// queued and written at the end of the turn, each inside its own socket's cork: one syscall
// per socket per turn.
//
// A turn ends in libuv's check phase (a setImmediate), where no uWS socket holds the cork; or,
// for what a read of one of the bus's sockets queued, when that read ends (readTurn): libuv
// calls a Node socket's read outside every uWS callback too, and the check phase costs a
// callback into JavaScript of its own (docs/decisions/0267-a-bus-read-ends-its-turn.md).
import process from 'node:process';

/** Something with bytes to hand to uWS at the end of this turn. */
export interface TurnWriter {
  /** Called once per scheduleWrite, with no uWS socket corked. */
  writeQueued(): void;
}

let writeQueue: TurnWriter[] = [];
let flushScheduled = false;
let reading = false;

/** Queues `w.writeQueued()` for the end of this turn; callers schedule each writer once per turn. */
export function scheduleWrite(w: TurnWriter): void {
  writeQueue.push(w);
  if (!flushScheduled && !reading) {
    flushScheduled = true;
    setImmediate(flushWrites);
  }
}

function flushWrites(): void {
  flushScheduled = false;
  writeAll();
}

function writeAll(): void {
  const queue = writeQueue;
  writeQueue = [];
  for (let i = 0; i < queue.length; i++) {
    try {
      queue[i].writeQueued();
    } catch (err) {
      // A write to a socket uWS already freed; the others in this turn still go out.
      process.emitWarning(`phonebridge: a queued write failed: ${String(err)}`);
    }
  }
}

/**
 * Runs `read` (what one read of a socket brought) as a turn of its own: the writes it queues go
 * out when it returns, not in the check phase. Only for a callback libuv makes for a Node
 * socket's read, where no uWS socket is corked; writes queued before it in this turn go out
 * with them. A write queued later (a promise's continuation) waits for the check phase.
 */
export function readTurn<A>(read: (arg: A) => void, arg: A): void {
  if (reading) return read(arg);
  reading = true;
  try {
    read(arg);
  } finally {
    reading = false;
    if (writeQueue.length > 0) writeAll();
  }
}
