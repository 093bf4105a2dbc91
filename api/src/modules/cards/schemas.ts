// What the card routes answer (docs/api.md "Card payments").
import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';

export const cardPaymentSchema = z.object({
  id: z.string().describe('The card payment; GET /api/v1/card-payments/{id} reads it again'),
  product: z.enum(PRODUCTS),
  gb: z.number(),
  bytes: z.number().int(),
  amountCents: z.number().int().describe('In the smallest unit of the currency, as charged'),
  currency: z.string(),
  status: z
    .enum(['creating', 'requires_action', 'processing', 'succeeded', 'failed', 'canceled'])
    .describe(
      'succeeded: paid and bought (invoiceId set); requires_action: confirm at actionUrl (3-D Secure); ' +
        'creating: Stripe did not answer yet, retry with the same Idempotency-Key',
    ),
  actionUrl: z.string().nullable().describe("Stripe's page where the customer confirms the payment"),
  failure: z.string().nullable(),
  invoiceId: z.string().nullable().describe('The paid invoice, once the payment succeeded'),
  createdAt: z.string(),
});
export type CardPaymentView = z.infer<typeof cardPaymentSchema>;

export const cardStatusSchema = z.object({
  available: z.boolean().describe('false: card payments are not set up on this platform (bill-later only)'),
  card: z.string().nullable().describe('The saved card ("visa 4242"), null when none is saved'),
});

export const cardSetupSchema = z.object({
  url: z.string().describe("Stripe's hosted page where the customer saves a card"),
});
