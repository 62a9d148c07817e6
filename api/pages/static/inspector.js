// Narrative Mirror inspector: signing in and out (JSON to this site only); the pages work without it.
"use strict";
// Where to go after signing in: a path of this site only (the URL parser drops tabs and newlines,
// so "/\t/evil.example" resolves to another host and is refused here as well as by the server).
function sameSitePath(next) {
  try {
    const url = new URL(next || "/chats", window.location.origin);
    if (url.origin === window.location.origin) {
      return url.pathname + url.search + url.hash;
    }
  } catch (error) {
    // not a URL at all: the default below
  }
  return "/chats";
}
document.addEventListener("DOMContentLoaded", () => {
  const login = document.getElementById("login");
  if (login) {
    login.addEventListener("submit", async (event) => {
      event.preventDefault();
      const token = document.getElementById("token").value.trim();
      const response = await fetch("/login", {
        method: "POST", credentials: "same-origin",
        headers: {"Content-Type": "application/json"}, body: JSON.stringify({token}),
      });
      if (response.ok) {
        window.location.assign(sameSitePath(login.dataset.next));
      } else {
        document.getElementById("login-error").hidden = false;
      }
    });
  }
  const signOut = document.getElementById("sign-out");
  if (signOut) {
    signOut.addEventListener("click", async () => {
      await fetch("/logout", {method: "POST", credentials: "same-origin",
                              headers: {"Content-Type": "application/json"}, body: "{}"});
      window.location.assign("/login");
    });
  }
});
