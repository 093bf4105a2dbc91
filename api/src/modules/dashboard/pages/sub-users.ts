// Sub-users (docs/adr/0037): the list with credentials (Reveal, Copy), Suspend / Resume, New
// password and Delete (each after a confirmation), an edit form, and a New sub-user form (the
// form, read and drawn, in ../sub-users-form.ts). Forms are judged by the API's own schemas; the
// API's repo does the work, with its errors.
import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';
import {
  createSubUser,
  deleteSubUser,
  getSubUser,
  listSubUsers,
  updateSubUser,
} from '#api/modules/sub-users/repo.ts';
import { subUserCreate, subUserUpdate, type SubUser } from '#api/modules/sub-users/schemas.ts';
import { attempt, doneNotice, formProblem, formValues, pathId } from '../forms.ts';
import { dashboardActor } from '#api/http/actor.ts';
import { html, type Html } from '../html.ts';
import {
  confirmButton,
  confirmPage,
  copyButton,
  csrfField,
  layout,
  message,
  rateText,
  revealButton,
  table,
  type Confirmation,
  type PageContext,
} from '../layout.ts';
import { get, post, type PageModule, type SignedInVisit } from '../page.ts';
import { countOf } from '#common/words.ts';
import {
  createFields,
  emptyForm,
  formOf,
  SUB_USER_LABELS,
  readForm,
  subUserEditView,
  subUserFields,
  updateFields,
  type SubUserForm,
} from '../sub-users-form.ts';

const NOTICES: ReadonlyMap<string, string> = new Map([
  ['created', 'The sub-user is created; gateways accept its credentials within a second.'],
  ['saved', 'The sub-user is saved; gateways apply it within a second.'],
  ['suspended', 'The sub-user is suspended; its connections are ended.'],
  ['active', 'The sub-user is resumed.'],
  ['password', 'A new password is in place for the sub-user.'],
  ['deleted', 'The sub-user is deleted.'],
]);
const MISSING = 'That sub-user does not exist or is already deleted.';

const resetPassword = (s: SubUser): Confirmation => ({
  id: `sub-password-${s.id}`,
  action: `/sub-users/${s.id}/reset-password`,
  open: 'New password',
  title: `Issue a new password for “${s.name}”?`,
  text: 'The current password stops working on every gateway within seconds; its open connections end.',
  confirm: 'Issue new password',
  back: '/sub-users',
});

const remove = (s: SubUser): Confirmation => ({
  id: `sub-delete-${s.id}`,
  action: `/sub-users/${s.id}/delete`,
  open: 'Delete',
  title: `Delete the sub-user “${s.name}”?`,
  text: 'Its credentials stop working within seconds and its usage figures are deleted. This cannot be undone.',
  confirm: 'Delete',
  back: '/sub-users',
  danger: true,
});

export const subUsersPage: PageModule = (deps) => {
  const { pool, credentialsKey } = deps;
  const render = async (
    { person, ctx, send }: SignedInVisit,
    state: { form?: SubUserForm; error?: string; notice?: string | undefined },
    status = 200,
  ) => {
    const subUsers = (await listSubUsers(pool, person.accountId, credentialsKey)) ?? [];
    send(subUsersView(ctx, { subUsers, limit: deps.subUsers.limit, ...state }), status);
  };
  const missing = (visit: SignedInVisit) => render(visit, { error: MISSING }, 404);
  /** The sub-user of the path, if it is the account's. */
  const pathSubUser = async ({ req, person }: SignedInVisit): Promise<SubUser | undefined> => {
    const id = pathId(req, 'subUserId');
    return id ? getSubUser(pool, person.accountId, id, credentialsKey) : undefined;
  };
  /** A page or action on the sub-user of the path; a sub-user that is not there is said on the list. */
  const onSubUser = (
    method: typeof get,
    path: string,
    handler: (visit: SignedInVisit, subUser: SubUser) => Promise<void> | void,
  ) =>
    method(`/sub-users/:subUserId${path}`, async (visit) => {
      const subUser = await pathSubUser(visit);
      return subUser ? handler(visit, subUser) : missing(visit);
    });

  return {
    nav: [{ href: '/sub-users', label: 'Sub-users' }],
    routes: [
      get('/sub-users', (visit) => render(visit, { notice: doneNotice(visit.req, NOTICES) })),

      post('/sub-users', async (visit) => {
        const form = readForm(visit.req.body);
        const parsed = subUserCreate.safeParse(createFields(form));
        if (!parsed.success)
          return render(visit, { form, error: formProblem(parsed.error, SUB_USER_LABELS) }, 422);
        const created = await attempt(() =>
          createSubUser(
            pool,
            visit.person.accountId,
            parsed.data,
            deps.subUsers.limit,
            credentialsKey,
            dashboardActor(visit.req, visit.person.email),
          ),
        );
        if (!created.ok) return render(visit, { form, error: created.refusal.message }, 409);
        visit.res.redirect(303, '/sub-users?done=created');
      }),

      onSubUser(get, '', ({ ctx, send }, subUser) =>
        send(subUserEditView(ctx, { subUser, form: formOf(subUser) })),
      ),

      onSubUser(post, '', async (visit, subUser) => {
        const form = readForm(visit.req.body);
        const parsed = subUserUpdate.safeParse(updateFields(form));
        const again = (error: string, status: number) =>
          visit.send(subUserEditView(visit.ctx, { subUser, form, error }), status);
        if (!parsed.success) return again(formProblem(parsed.error, SUB_USER_LABELS), 422);
        const saved = await attempt(() =>
          updateSubUser(
            pool,
            visit.person.accountId,
            subUser.id,
            parsed.data,
            credentialsKey,
            dashboardActor(visit.req, visit.person.email),
          ),
        );
        if (!saved.ok) return again(saved.refusal.message, 409);
        if (!saved.value) return missing(visit);
        visit.res.redirect(303, '/sub-users?done=saved');
      }),

      post('/sub-users/:subUserId/status', async (visit) => {
        const status = z
          .enum(['active', 'suspended'])
          .safeParse(formValues(visit.req.body, ['status']).status);
        const subUser = await pathSubUser(visit);
        if (!subUser || !status.success) return missing(visit);
        await updateSubUser(
          pool,
          visit.person.accountId,
          subUser.id,
          { status: status.data },
          credentialsKey,
          dashboardActor(visit.req, visit.person.email),
        );
        visit.res.redirect(303, `/sub-users?done=${status.data}`);
      }),

      onSubUser(get, '/reset-password', ({ ctx, send }, subUser) =>
        send(confirmPage(ctx, resetPassword(subUser))),
      ),

      onSubUser(post, '/reset-password', async (visit, subUser) => {
        await updateSubUser(
          pool,
          visit.person.accountId,
          subUser.id,
          { resetPassword: true },
          credentialsKey,
          dashboardActor(visit.req, visit.person.email),
        );
        visit.res.redirect(303, '/sub-users?done=password');
      }),

      onSubUser(get, '/delete', ({ ctx, send }, subUser) => send(confirmPage(ctx, remove(subUser)))),

      post('/sub-users/:subUserId/delete', async (visit) => {
        const id = pathId(visit.req, 'subUserId');
        if (
          !id ||
          !(await deleteSubUser(
            pool,
            visit.person.accountId,
            id,
            dashboardActor(visit.req, visit.person.email),
          ))
        )
          return missing(visit);
        visit.res.redirect(303, '/sub-users?done=deleted');
      }),
    ],
  };
};

/** The products a sub-user has a limit on or used, as "basic: 0.3 of 1.5 GB". */
function trafficLines(s: SubUser): Html {
  const lines = PRODUCTS.filter((p) => s.products[p].limitBytes !== null || s.products[p].usedBytes > 0);
  if (lines.length === 0) return html`No limits, nothing used`;
  return html`<ul class="plain">
    ${lines.map((p) => {
      const u = s.products[p];
      return html`<li>
        ${p}: ${String(u.usedGb)}
        ${u.limitGb === null ? html`GB used, no limit` : html`of ${String(u.limitGb)} GB`}
      </li>`;
    })}
  </ul>`;
}

/** A sub-user's credentials as username:password, masked, with Reveal and Copy. */
function credentials(s: SubUser): Html {
  return html`<div class="row">
      <input
        id="sub-cred-${s.id}"
        class="mono"
        type="password"
        value="${s.username}:${s.password}"
        aria-label="Proxy credentials of ${s.name} (username:password)"
        readonly
        autocomplete="off"
      />
      ${revealButton(`sub-cred-${s.id}`, `Reveal the credentials of ${s.name}`)}
      ${copyButton(`sub-cred-${s.id}`, `Copy the credentials of ${s.name}`)}
    </div>
    <span class="hint mono">${s.username}</span>`;
}

function actions(ctx: PageContext, s: SubUser): Html {
  const toggle = s.status === 'active' ? 'Suspend' : 'Resume';
  return html`<div class="row">
    <a href="/sub-users/${s.id}" aria-label="Edit ${s.name}">Edit</a>
    <form method="post" action="/sub-users/${s.id}/status">
      ${csrfField(ctx)}
      <input type="hidden" name="status" value="${s.status === 'active' ? 'suspended' : 'active'}" />
      <button type="submit" class="secondary" aria-label="${toggle} ${s.name}">${toggle}</button>
    </form>
    ${confirmButton(ctx, resetPassword(s))} ${confirmButton(ctx, remove(s))}
  </div>`;
}

function subUsersView(
  ctx: PageContext,
  data: {
    subUsers: SubUser[];
    limit: number;
    form?: SubUserForm;
    error?: string;
    notice?: string | undefined;
  },
): Html {
  return layout(
    ctx,
    'Sub-users',
    html`${message('success', data.notice)}
      <section class="card" aria-labelledby="subs-h">
        <h2 id="subs-h">Your sub-users</h2>
        <p class="hint">
          Each sub-user has its own proxy username and password: use them in place of yours, with the same
          targeting (the Proxies page generates proxies for a sub-user). Its traffic is billed to your
          balance; a limit caps what it may use on a product since it was created. Changes reach the gateways
          within a second. At most ${countOf(data.limit, 'sub-user')}.
        </p>
        ${
          data.subUsers.length === 0
            ? html`<p>No sub-users yet.</p>`
            : table({
                label: 'Sub-users',
                columns: [
                  'Name',
                  'Proxy credentials',
                  'Status',
                  'Traffic',
                  'Connection cap',
                  'Bandwidth cap',
                  { hidden: 'Actions' },
                ],
                rows: data.subUsers.map(
                  (s) =>
                    html`<tr>
                      <td>${s.name}</td>
                      <td>${credentials(s)}</td>
                      <td>${s.status}</td>
                      <td>${trafficLines(s)}</td>
                      <td>${s.maxConnections === null ? "plan's cap" : String(s.maxConnections)}</td>
                      <td>${s.bytesPerSecond === null ? 'none' : rateText(s.bytesPerSecond)}</td>
                      <td>${actions(ctx, s)}</td>
                    </tr>`,
                ),
              })
        }
      </section>
      <section class="card" aria-labelledby="sub-new-h">
        <h2 id="sub-new-h">New sub-user</h2>
        ${message('error', data.error)}
        <form method="post" action="/sub-users">
          ${csrfField(ctx)} ${subUserFields(data.form ?? emptyForm(), 'new', true)}
          <button type="submit">Create sub-user</button>
        </form>
      </section>`,
  );
}
