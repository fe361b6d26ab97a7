/**
 * Who is signed in. The session is the server's `HttpOnly` cookie; the console remembers only the user's
 * id (in `localStorage`, to send as `New-Api-User`) and asks `GET /api/user/self` who that is when a
 * page loads. A 401 there, or on any later call, means signed out.
 */

import { ApiError } from "./api.js";

const STORED_ID = "tollway.user";

export class Session {
  /** @param {import("./api.js").Api} api */
  constructor(api) {
    this.api = api;
    /** @type {import("./types.js").SelfUser | null} */
    this.user = null;
    /** When `user` was last read from the server (ms since the epoch). */
    this.readAt = 0;
  }

  /** The signed-in user's role, 0 when nobody is signed in. */
  get role() {
    return this.user ? this.user.role : 0;
  }

  /** At page load: who the remembered id is, if the session is still alive (one call, or none). */
  async restore() {
    const id = Number(window.localStorage.getItem(STORED_ID) ?? 0);
    if (!Number.isSafeInteger(id) || id <= 0) return;
    this.api.userId = id;
    try {
      await this.refresh(0);
    } catch (error) {
      if (error instanceof ApiError && (error.status === 401 || error.status === 403)) this.forget();
      else throw error;
    }
  }

  /**
   * Read the signed-in user again, unless it was read less than `maxAge` ms ago.
   * @param {number} maxAge
   * @returns {Promise<import("./types.js").SelfUser>}
   */
  async refresh(maxAge) {
    if (this.user && Date.now() - this.readAt < maxAge) return this.user;
    /** @type {import("./types.js").SelfUser} */
    const user = await this.api.get("/api/user/self");
    this.user = user;
    this.readAt = Date.now();
    return user;
  }

  /**
   * A login opened a session: remember the user and read their account.
   * @param {import("./types.js").LoginView} login
   */
  async signedIn(login) {
    window.localStorage.setItem(STORED_ID, String(login.id));
    this.api.userId = login.id;
    await this.refresh(0);
  }

  /** Sign out on the server (always succeeds there), then forget the user here. */
  async signOut() {
    try {
      await this.api.get("/api/user/logout");
    } finally {
      this.forget();
    }
  }

  /** Forget the user here only (the server already ended the session). */
  forget() {
    window.localStorage.removeItem(STORED_ID);
    this.api.userId = 0;
    this.user = null;
    this.readAt = 0;
  }
}
