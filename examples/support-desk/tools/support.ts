/**
 * The support desk's tools: one that only reads (looking an order up), one that changes the world (a refund). Loaded
 * by `baton dev --tools tools/support.ts` (see package.json) or `BATON_TOOLS=tools/support.ts baton worker`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { defineTool, ToolError } from 'baton';
import { z } from 'zod';

/** The project's data directory: `baton dev` and `baton worker` run in the project directory (`npm start` does). */
const DATA = path.resolve('data');
const ORDERS = path.join(DATA, 'orders.json');
/** The payment provider of this example: one JSON line per refund, keyed by the call's idempotency key. */
const REFUNDS = path.join(DATA, 'refunds.jsonl');

interface Order {
  customer: string;
  item: string;
  paid_eur: number;
  delivered: string | null;
  status: string;
}

function readOrders(): Record<string, Order> {
  return JSON.parse(fs.readFileSync(ORDERS, 'utf8')) as Record<string, Order>;
}

function findOrder(orderId: string): Order {
  const order = readOrders()[orderId];
  // A ToolError is an answer the model can act on: it reads "Error: …" and the turn goes on.
  if (order === undefined) throw new ToolError(`there is no order ${orderId}: ask the customer for their order number`);
  return order;
}

const lookupOrder = defineTool({
  name: 'lookup_order',
  description: "An order's customer, item, amount paid and delivery status.",
  parameters: z.object({ order_id: z.string().regex(/^\d{4}$/, 'is a four-digit order number') }),
  // Read-only: retried when it throws (twice by default), and run again if its worker dies.
  run: ({ order_id }) => ({ order_id, ...findOrder(order_id) }),
});

const issueRefund = defineTool({
  name: 'issue_refund',
  description: 'Refunds (part of) an order to the card it was paid with.',
  parameters: z.object({
    order_id: z.string().regex(/^\d{4}$/, 'is a four-digit order number'),
    amount_eur: z.number().positive(),
    reason: z.string().min(1),
  }),
  // It moves money: at most one run per call, and never a second one after a crash.
  sideEffects: true,
  // A person approves every refund over 20 EUR before it runs (`baton approve`, or the explorer's button).
  needsApproval: (args) => args.amount_eur > 20,
  approvalTimeout_s: 24 * 3600,
  timeout_s: 30,
  run: (args, ctx) => {
    const order = findOrder(args.order_id);
    if (args.amount_eur > order.paid_eur) {
      throw new ToolError(`order ${args.order_id} was paid ${order.paid_eur} EUR: refund at most that`);
    }
    // ctx.operationId is the same on every retry of this call: a real payment API takes it as the idempotency key.
    const refund = { id: ctx.operationId, ...args, by: ctx.agent.name, at: new Date().toISOString() };
    fs.appendFileSync(REFUNDS, `${JSON.stringify(refund)}\n`);
    return `Refunded ${args.amount_eur.toFixed(2)} EUR to ${order.customer} for order ${args.order_id}.`;
  },
});

export default [lookupOrder, issueRefund];
