// Security (docs/dashboard.md "Security", docs/adr/0077): two-factor sign-in (TOTP, RFC 6238)
// turned on with the secret as text and as a QR code, confirmed with a first code, then ten
// recovery codes shown once; turned off with a code. The sign-in's second step ("Code" after the
// password) is here too, as a signed-out route, throttled with the password's failures. And the
// account's sessions: where and when each started and was last seen, signed out one by one or all
// but this one.
import { dashboardActor } from '#api/http/actor.ts';
import { TwoFactor } from '#api/modules/two-factor/service.ts';
import { doneNotice, formValues, pathId } from '../forms.ts';
import { html, raw, type Html } from '../html.ts';
import { csrfField, dateText, layout, message, table, type PageContext } from '../layout.ts';
import { get, post, signedOut, type PageModule, type SignedInVisit, type Visit } from '../page.ts';
import * as repo from '../repo.ts';
import { preSessionHashOf, sessionHashOf, SESSION_IDLE_SECONDS } from '../session.ts';
import {
  keptOnFailure,
  auditSignInFailure,
  reserveSignIn,
  signInBuckets,
  SIGN_IN_CODE_PATH,
  SIGN_IN_THROTTLED,
} from '../sign-in-rules.ts';
import { browserText } from '../user-agent.ts';
import { decoyHash, MAX_PASSWORD_LENGTH, verifyPassword } from '../passwords.ts';

const PATH = '/security';
const START = '/security/two-factor/start';
const CONFIRM = '/security/two-factor/confirm';
const DISABLE = '/security/two-factor/disable';
const SIGN_OUT_OTHERS = '/security/sessions/sign-out-others';
const signOutPath = (id: string) => `/security/sessions/${id}/sign-out`;

const NOTICES = new Map([
  ['off', 'Two-factor authentication is off.'],
  ['signed-out', 'That session is signed out.'],
  ['others', 'Every other session is signed out.'],
]);
const CODE_HINT = 'The 6-digit code your authenticator app shows now, or one of your recovery codes.';
const WRONG_CODE = 'Code: that code is not right. Type the code your app shows now.';
const WRONG_PASSWORD = 'Password: that is not your password.';
const NO_PASSWORD = 'Password: enter your password.';
/** The typed "Password", as typed (spaces are part of it). */
const typedPassword = (visit: Visit) => formValues(visit.req.body, ['password'], ['password']).password;
/** At this many unused recovery codes or fewer, the page says how to get new ones. */
const FEW_RECOVERY_CODES = 3;
/** A code is 6 digits, a recovery code 12 letters and digits with dashes; anything longer is not one. */
const MAX_CODE_LENGTH = 32;

interface SecurityState {
  /** Turning on: the secret waiting for its first code. */
  enrolling?: { secret: string; qr: string };
  /** Just turned on: shown once. */
  recoveryCodes?: string[];
  /** What was typed into "Code" on a refused form. */
  code?: string;
  error?: string;
  notice?: string | undefined;
}

/** The typed "Code": trimmed, '' when absent, and a message when it is not a code's shape. */
function typedCode(visit: Visit): { code: string; problem?: string } {
  const { code } = formValues(visit.req.body, ['code']);
  if (!code) return { code, problem: 'Code: enter the code.' };
  if (code.length > MAX_CODE_LENGTH) return { code: '', problem: 'Code: that is not a code.' };
  return { code };
}

export const securityPage: PageModule = ({ pool, credentialsKey, https }) => {
  const twoFactor = new TwoFactor(pool, credentialsKey);

  const render = async (visit: SignedInVisit, state: SecurityState, status = 200) => {
    const { person, req } = visit;
    const [factor, sessions] = await Promise.all([
      twoFactor.state(person.accountId),
      repo.listSessions(pool, person.accountId, sessionHashOf(req, https), SESSION_IDLE_SECONDS),
    ]);
    let enrolling = state.enrolling;
    if (!enrolling && factor.pending && !state.recoveryCodes) {
      const secret = await twoFactor.pendingSecret(person.accountId);
      if (secret) enrolling = { secret, qr: await twoFactor.qr(secret, person.email) };
    }
    visit.send(securityView(visit.ctx, { ...state, enrolling, factor, sessions }), status);
  };
  const actor = (visit: SignedInVisit) => dashboardActor(visit.req, visit.person.email);

  return {
    nav: [{ href: PATH, label: 'Security' }],
    routes: [
      get(PATH, (visit) => render(visit, { notice: doneNotice(visit.req, NOTICES) })),

      // Turning on and off ask for the password (docs/adr/0086): a session alone (a borrowed
      // browser, a stolen cookie) cannot bind the account to an attacker's authenticator or take
      // the second factor away.
      post(START, async (visit) => {
        const { person, req } = visit;
        if (!typedPassword(visit)) return render(visit, { error: NO_PASSWORD }, 422);
        const attempt = await reserveSignIn(pool, signInBuckets(person.email, req.ip));
        if (!attempt) return render(visit, { error: SIGN_IN_THROTTLED }, 429);
        const problem = await keptOnFailure(pool, attempt, () => passwordProblem(visit));
        if (problem) return render(visit, { error: problem }, 422);
        await repo.releaseAttempt(pool, attempt);
        await twoFactor.start(person.accountId);
        visit.res.redirect(303, PATH);
      }),

      post(CONFIRM, async (visit) => {
        const { code, problem } = typedCode(visit);
        if (problem) return render(visit, { code, error: problem }, 422);
        const codes = await twoFactor.confirm(visit.person.accountId, code, actor(visit));
        if (!codes) return render(visit, { code, error: WRONG_CODE }, 422);
        await render(visit, { recoveryCodes: codes });
      }),

      post(DISABLE, async (visit) => {
        const { person, req } = visit;
        const { code, problem } = typedCode(visit);
        if (problem) return render(visit, { code, error: problem }, 422);
        if (!typedPassword(visit)) return render(visit, { code, error: NO_PASSWORD }, 422);
        // Reserved before the check, as a sign-in's code (docs/security.md, "Throttles").
        const attempt = await reserveSignIn(pool, signInBuckets(person.email, req.ip));
        if (!attempt) return render(visit, { error: SIGN_IN_THROTTLED }, 429);
        const wrongPassword = await keptOnFailure(pool, attempt, () => passwordProblem(visit));
        if (wrongPassword) return render(visit, { code, error: wrongPassword }, 422);
        const off = await keptOnFailure(pool, attempt, () =>
          twoFactor.disable(person.accountId, code, actor(visit)),
        );
        if (!off) return render(visit, { code, error: WRONG_CODE }, 422);
        await repo.releaseAttempt(pool, attempt);
        visit.res.redirect(303, `${PATH}?done=off`);
      }),

      post('/security/sessions/:sessionId/sign-out', async (visit) => {
        const id = pathId(visit.req, 'sessionId');
        const current = sessionHashOf(visit.req, https)!;
        const ended = id
          ? await repo.revokeSessions(pool, visit.person.accountId, current, id, actor(visit))
          : [];
        if (ended.length === 0)
          return render(visit, { error: 'That session is already signed out, or it is this one.' }, 404);
        visit.res.redirect(303, `${PATH}?done=signed-out`);
      }),

      post(SIGN_OUT_OTHERS, async (visit) => {
        const current = sessionHashOf(visit.req, https)!;
        await repo.revokeSessions(pool, visit.person.accountId, current, null, actor(visit));
        visit.res.redirect(303, `${PATH}?done=others`);
      }),

      // The sign-in's second step: the password was right (pages/sign-in.ts) and this browser's
      // pre-session cookie names the waiting sign-in.
      signedOut.get(SIGN_IN_CODE_PATH, async (visit) => {
        const waiting = await waitingSignIn(visit);
        if (!waiting) return visit.res.redirect(303, '/sign-in');
        visit.send(codeStepView(visit.ctx, { email: waiting.email }));
      }),

      signedOut.post(SIGN_IN_CODE_PATH, async (visit) => {
        const { req, send } = visit;
        const waiting = await waitingSignIn(visit);
        if (!waiting) return visit.res.redirect(303, '/sign-in');
        const view = (s: { code: string; error: string }) => codeStepView(visit.ctx, { ...s, ...waiting });
        const { code, problem } = typedCode(visit);
        if (problem) return send(view({ code, error: problem }), 422);
        // Reserved before the check: a burst released at once checks at most the throttle's number.
        const buckets = signInBuckets(waiting.email, req.ip);
        const attempt = await reserveSignIn(pool, buckets);
        if (!attempt) return send(view({ code: '', error: SIGN_IN_THROTTLED }), 429);
        const used = await keptOnFailure(pool, attempt, () => twoFactor.check(waiting.accountId, code));
        if (!used) {
          await auditSignInFailure(
            pool,
            { accountId: waiting.accountId, email: waiting.email, ip: req.ip },
            'second_factor',
          );
          return send(view({ code, error: WRONG_CODE }), 401);
        }
        // The right code is not a failure.
        await repo.releaseAttempt(pool, attempt);
        if (waiting.status !== 'active')
          return send(view({ code: '', error: 'This account is suspended. Contact support.' }), 403);
        await repo.deleteChallenge(pool, preSessionHashOf(req, https)!);
        await repo.clearFailures(pool, buckets[0]);
        await repo.deleteExpiredSessions(pool, SESSION_IDLE_SECONDS);
        await visit.startSession(waiting.accountId, { secondFactor: used });
        visit.res.redirect(303, '/');
      }),
    ],
  };

  /** Why the typed "Password" does not confirm the signed-in person, or undefined when it does. */
  async function passwordProblem(visit: SignedInVisit): Promise<string | undefined> {
    const password = typedPassword(visit);
    if (!password) return NO_PASSWORD;
    if (password.length > MAX_PASSWORD_LENGTH) return WRONG_PASSWORD;
    const row = await repo.findByEmail(pool, visit.person.email);
    const ok = await verifyPassword(password, row?.passwordHash ?? (await decoyHash()));
    return ok && row?.passwordHash ? undefined : WRONG_PASSWORD;
  }

  async function waitingSignIn(visit: Visit) {
    if (visit.person) return undefined;
    const preSession = preSessionHashOf(visit.req, https);
    return preSession && (await repo.readChallenge(pool, preSession));
  }
};

type Factor = Awaited<ReturnType<TwoFactor['state']>>;

function securityView(
  ctx: PageContext,
  s: SecurityState & { factor: Factor; sessions: repo.SessionRow[] },
): Html {
  return layout(
    ctx,
    'Security',
    html`${message('error', s.error)}${message('success', s.notice)}
      <section aria-labelledby="two-factor-h">
        <h2 id="two-factor-h">Two-factor authentication</h2>
        ${twoFactorPart(ctx, s)}
      </section>
      <section aria-labelledby="sessions-h">
        <h2 id="sessions-h">Sessions</h2>
        ${sessionsPart(ctx, s.sessions)}
      </section>`,
  );
}

const codeField = (code: string | undefined, hint: string) =>
  html`<label for="code">Code</label>
    <p class="hint" id="code-hint">${hint}</p>
    <input
      id="code"
      name="code"
      type="text"
      inputmode="text"
      autocomplete="one-time-code"
      spellcheck="false"
      maxlength="${MAX_CODE_LENGTH}"
      required
      aria-describedby="code-hint"
      value="${code ?? ''}"
    />`;

/** The account's password, asked again before two-factor is turned on or off (never refilled). */
const passwordField = () =>
  html`<label for="password">Password</label>
    <input id="password" name="password" type="password" autocomplete="current-password" required />`;

/** The secret in groups of four, as authenticator apps accept it typed. */
const grouped = (secret: string) => secret.replace(/(.{4})(?=.)/g, '$1 ');

function twoFactorPart(ctx: PageContext, s: SecurityState & { factor: Factor }): Html {
  if (s.recoveryCodes)
    return html`${message('success', 'Two-factor authentication is on.')}
      <p>
        <strong>Save these recovery codes now.</strong> Each one signs you in once if you lose your
        authenticator app. They are not shown again.
      </p>
      <ul class="recovery-codes" aria-label="Recovery codes">
        ${s.recoveryCodes.map((c) => html`<li><code>${c}</code></li>`)}
      </ul>
      <p><a href="${PATH}">I have saved them</a></p>`;
  if (s.factor.enabledAt)
    return html`${message(
        'notice',
        s.factor.recoveryCodesLeft <= FEW_RECOVERY_CODES
          ? `Only ${s.factor.recoveryCodesLeft} recovery codes left. To get ten new ones, turn two-factor authentication off and on again.`
          : undefined,
      )}
      <p>
        Two-factor authentication is <strong>on</strong> since ${dateText(s.factor.enabledAt)}. Signing in
        asks for a code from your authenticator app after the password. Recovery codes left:
        ${s.factor.recoveryCodesLeft}.
      </p>
      <form method="post" action="${DISABLE}" novalidate>
        ${csrfField(ctx)} ${passwordField()} ${codeField(s.code, CODE_HINT)}
        <button type="submit" class="danger">Turn off two-factor authentication</button>
      </form>`;
  if (s.enrolling)
    return html`<ol>
        <li>
          Scan this QR code with an authenticator app, or type the secret into it.
          <figure>
            ${raw(s.enrolling.qr)}
            <figcaption>Secret: <code id="totp-secret">${grouped(s.enrolling.secret)}</code></figcaption>
          </figure>
        </li>
        <li>Type the 6-digit code the app shows, to confirm.</li>
      </ol>
      <form method="post" action="${CONFIRM}" novalidate>
        ${csrfField(ctx)} ${codeField(s.code, 'The 6-digit code your authenticator app shows now.')}
        <button type="submit">Confirm</button>
      </form>`;
  return html`<p>
      Two-factor authentication is <strong>off</strong>. With it on, signing in asks for a code from an
      authenticator app on your phone as well as your password.
    </p>
    <form method="post" action="${START}" novalidate>
      ${csrfField(ctx)} ${passwordField()}<button type="submit">Turn on two-factor authentication</button>
    </form>`;
}

function sessionsPart(ctx: PageContext, sessions: repo.SessionRow[]): Html {
  const others = sessions.filter((x) => !x.current).length;
  const rows = sessions.map((x) => {
    const browser = browserText(x.userAgent);
    return html`<tr>
      <td>${dateText(x.createdAt)}</td>
      <td>${dateText(x.lastSeenAt)}</td>
      <td>${x.ip ?? 'unknown'}</td>
      <td>${browser}${x.current ? html` <strong>(this session)</strong>` : ''}</td>
      <td>
        ${
          x.current
            ? ''
            : html`<form method="post" action="${signOutPath(x.id)}">
                ${csrfField(ctx)}<button
                  type="submit"
                  class="secondary"
                  aria-label="Sign out ${browser} from ${x.ip ?? 'an unknown address'}, started ${dateText(x.createdAt)}"
                >
                  Sign out
                </button>
              </form>`
        }
      </td>
    </tr>`;
  });
  return html`<p>Where you are signed in to this dashboard. A session ends after 30 minutes unused.</p>
    ${table({
      label: 'Signed-in sessions',
      caption: 'Your signed-in sessions',
      columns: ['Started', 'Last seen', 'Address', 'Browser', { hidden: 'Action' }],
      rows,
    })}
    ${
      others > 0
        ? html`<form method="post" action="${SIGN_OUT_OTHERS}">
            ${csrfField(ctx)}<button type="submit" class="secondary">Sign out everywhere else</button>
          </form>`
        : ''
    }`;
}

function codeStepView(ctx: PageContext, s: { email: string; code?: string; error?: string }): Html {
  return layout(
    ctx,
    'Enter your code',
    html`${message('error', s.error)}
      <p>Two-factor authentication is on for <strong>${s.email}</strong>.</p>
      <form method="post" action="${SIGN_IN_CODE_PATH}" novalidate>
        ${csrfField(ctx)} ${codeField(s.code, CODE_HINT)}
        <button type="submit">Sign in</button>
      </form>
      <p><a href="/sign-in">Start again</a></p>`,
    { narrow: true },
  );
}
