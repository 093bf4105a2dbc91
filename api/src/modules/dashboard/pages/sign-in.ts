// Signing in and out, "Forgot password?" and the one-time link that sets a password
// (docs/adr/0050). Sign-in failures are throttled per email and per address; an unknown email
// costs the same scrypt as a known one; the links are password-links/'s, shared with the admin API.
// With two-factor sign-in on, a right password leads to the code step (pages/security.ts,
// docs/adr/0077) instead of a session.
import { z } from 'zod';
import { hashToken, SET_PASSWORD_PATH } from '#api/modules/password-links/service.ts';
import { peekToken, setPasswordWithToken } from '#api/modules/password-links/repo.ts';
import { formValues } from '../forms.ts';
import { html, type Html } from '../html.ts';
import { csrfField, layout, message, type PageContext } from '../layout.ts';
import { post, signedOut, type PageModule, type Visit } from '../page.ts';
import {
  decoyHash,
  hashPassword,
  MAX_PASSWORD_LENGTH,
  passwordProblem,
  verifyPassword,
} from '../passwords.ts';
import * as repo from '../repo.ts';
import { preSessionHashOf, SESSION_IDLE_SECONDS } from '../session.ts';
import {
  CODE_STEP_SECONDS,
  keptOnFailure,
  auditSignInFailure,
  reserveForgot,
  reserveLinkLookup,
  reserveSignIn,
  signInBuckets,
  SIGN_IN_CODE_PATH,
  SIGN_IN_THROTTLED,
  TOO_MANY_REQUESTS,
} from '../sign-in-rules.ts';
import { isEnabled as twoFactorEnabled } from '#api/modules/two-factor/repo.ts';

const formString = (max: number) => z.string().max(max).optional().default('');
const signInForm = z.object({ email: formString(254), password: formString(MAX_PASSWORD_LENGTH) });

export const signInPage: PageModule = ({ pool, logger, resetRequests, https }) => {
  /**
   * The usable link's owner; an unknown, used or expired link counts against the address (its
   * reservation is kept), a usable one does not. 'throttled' past the address's number.
   */
  const lookUpLink = async (visit: Visit, token: string) => {
    const attempt = await reserveLinkLookup(pool, visit.req.ip);
    if (!attempt) return 'throttled' as const;
    const owner = token ? await peekToken(pool, hashToken(token)) : undefined;
    if (owner) await repo.releaseAttempt(pool, attempt);
    return owner;
  };
  return {
    routes: [
      signedOut.get('/sign-in', ({ req, res, person, ctx, send }) => {
        if (person) return res.redirect(303, '/');
        const notice = req.query.done === 'password' ? 'Your password is set. Sign in with it.' : undefined;
        send(signInView(ctx, { notice }));
      }),

      signedOut.post('/sign-in', async (visit) => {
        const { req, send } = visit;
        const form = signInForm.safeParse(req.body);
        const email = form.success ? form.data.email.trim() : '';
        const password = form.success ? form.data.password : '';
        const buckets = signInBuckets(email, req.ip);
        // Reserved before the check: a burst released at once checks at most the throttle's number.
        const attempt = await reserveSignIn(pool, buckets);
        if (!attempt) return send(signInView(visit.ctx, { email, error: SIGN_IN_THROTTLED }), 429);
        const checked = await keptOnFailure(pool, attempt, async () => {
          const row = email ? await repo.findByEmail(pool, email) : undefined;
          // Unknown emails and accounts without a password still cost one scrypt: timing tells nothing.
          const ok = await verifyPassword(password, row?.passwordHash ?? (await decoyHash()));
          return { row, ok: ok && !!row?.passwordHash };
        });
        const { row } = checked;
        if (!row || !checked.ok) {
          if (row)
            await auditSignInFailure(
              pool,
              { accountId: row.accountId, email: row.email, ip: req.ip },
              'password',
            );
          return send(signInView(visit.ctx, { email, error: 'The email or password is not right.' }), 401);
        }
        // The right password is not a failure.
        await repo.releaseAttempt(pool, attempt);
        if (row.status !== 'active') {
          const error = 'This account is suspended. Contact support.';
          return send(signInView(visit.ctx, { email, error }), 403);
        }
        if (await twoFactorEnabled(pool, row.accountId)) {
          // The failures are cleared only once the code is right too: a password alone resets nothing.
          // The CSRF check let this POST in, so the pre-session cookie is there.
          const preSession = preSessionHashOf(req, https);
          if (!preSession) return visit.res.redirect(303, '/sign-in');
          await repo.putChallenge(pool, preSession, row.accountId, CODE_STEP_SECONDS);
          return visit.res.redirect(303, SIGN_IN_CODE_PATH);
        }
        await repo.clearFailures(pool, buckets[0]);
        // Housekeeping without a job: sign-ins are rare, and the expiry index makes this cheap.
        await repo.deleteExpiredSessions(pool, SESSION_IDLE_SECONDS);
        await visit.startSession(row.accountId, { secondFactor: 'none' });
        visit.res.redirect(303, '/');
      }),

      signedOut.get('/forgot-password', ({ ctx, send }) => send(forgotView(ctx))),

      signedOut.post('/forgot-password', async (visit) => {
        const { req, send } = visit;
        const email = signInForm.safeParse(req.body).data?.email.trim() ?? '';
        // Each ask counts against the address and the email typed, reserved before anything else,
        // so the form cannot be used to flood a mailbox, even by a burst.
        if (!(await reserveForgot(pool, email, req.ip)))
          return send(forgotView(visit.ctx, { error: TOO_MANY_REQUESTS }), 429);
        // No lookup here: the job does it after the answer, so the answer takes the same work and
        // says the same whether or not the email exists (docs/security.md, "Forgot password" under "Links in emails").
        if (email) resetRequests.enqueue(email, req.ip ?? null);
        send(forgotView(visit.ctx, { sent: true }));
      }),

      signedOut.get(SET_PASSWORD_PATH, async (visit) => {
        const token = typeof visit.req.query.token === 'string' ? visit.req.query.token : '';
        const owner = await lookUpLink(visit, token);
        if (owner === 'throttled') return visit.send(linkThrottledView(visit.ctx), 429);
        if (!owner) return visit.send(linkInvalidView(visit.ctx), 410);
        visit.send(setPasswordView(visit.ctx, { token, email: owner.email }));
      }),

      signedOut.post(SET_PASSWORD_PATH, async (visit) => {
        const { token, password } = formValues(visit.req.body, ['token', 'password'], ['token', 'password']);
        const owner = await lookUpLink(visit, token);
        if (owner === 'throttled') return visit.send(linkThrottledView(visit.ctx), 429);
        if (!owner) return visit.send(linkInvalidView(visit.ctx), 410);
        const problem = passwordProblem(password, [owner.email, ...owner.email.split(/[@.+_-]/)]);
        if (problem)
          return visit.send(setPasswordView(visit.ctx, { token, email: owner.email, error: problem }), 422);
        const accountId = await setPasswordWithToken(
          pool,
          hashToken(token),
          await hashPassword(password),
          visit.req.ip ?? null,
        );
        if (!accountId) return visit.send(linkInvalidView(visit.ctx), 410);
        logger.info({ accountId }, 'dashboard password set');
        visit.res.redirect(303, '/sign-in?done=password');
      }),

      post('/sign-out', async ({ res, endSession }) => {
        await endSession();
        res.redirect(303, '/sign-in');
      }),
    ],
  };
};

/** The sign-in form; also what a signed-out visitor sees at /. */
export function signInView(
  ctx: PageContext,
  state: { email?: string; error?: string; notice?: string } = {},
): Html {
  return layout(
    ctx,
    'Sign in',
    html`${message('error', state.error)}${message('success', state.notice)}
      <form method="post" action="/sign-in" novalidate>
        ${csrfField(ctx)}
        <label for="email">Email</label>
        <input
          id="email"
          name="email"
          type="email"
          autocomplete="username"
          required
          value="${state.email ?? ''}"
        />
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required />
        <button type="submit">Sign in</button>
      </form>
      <p><a href="/forgot-password">Forgot password?</a></p>`,
    { narrow: true },
  );
}

function forgotView(ctx: PageContext, state: { sent?: boolean; error?: string } = {}): Html {
  return layout(
    ctx,
    'Reset your password',
    state.sent
      ? html`${message('success', 'If an account exists for that email, we have sent it a link to set a new password. The link works once, for one hour.')}
          <p><a href="/sign-in">Back to sign in</a></p>`
      : html`${message('error', state.error)}
          <p>Enter the email of your account and we will email you a link to set a new password.</p>
          <form method="post" action="/forgot-password">
            ${csrfField(ctx)}
            <label for="email">Email</label>
            <input id="email" name="email" type="email" autocomplete="username" required />
            <button type="submit">Send reset link</button>
          </form>
          <p><a href="/sign-in">Back to sign in</a></p>`,
    { narrow: true },
  );
}

function setPasswordView(ctx: PageContext, state: { token: string; email: string; error?: string }): Html {
  return layout(
    ctx,
    'Set your password',
    html`${message('error', state.error)}
      <p>Choose the password for <strong>${state.email}</strong>.</p>
      <form method="post" action="${SET_PASSWORD_PATH}" novalidate>
        ${csrfField(ctx)}
        <input type="hidden" name="token" value="${state.token}" />
        <input type="hidden" name="username" value="${state.email}" autocomplete="username" />
        <label for="new-password">New password</label>
        <p class="hint" id="new-password-hint">
          At least 10 characters. A few unrelated words make a strong password that is easy to remember.
        </p>
        <input
          id="new-password"
          name="password"
          type="password"
          autocomplete="new-password"
          minlength="10"
          required
          aria-describedby="new-password-hint"
        />
        <button type="submit">Set password</button>
      </form>`,
    { narrow: true },
  );
}

function linkThrottledView(ctx: PageContext): Html {
  return layout(ctx, 'Too many tries', html`${message('error', TOO_MANY_REQUESTS)}`, { narrow: true });
}

function linkInvalidView(ctx: PageContext): Html {
  return layout(
    ctx,
    'This link does not work',
    html`<p>The link has expired or has already been used. Each link works once.</p>
      <p><a href="/forgot-password">Get a new link</a> or <a href="/sign-in">sign in</a>.</p>`,
    { narrow: true },
  );
}
