// Narrative Mirror inspector: signing in and out (JSON to this site only); the pages work without it.
"use strict";
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
        window.location.assign(login.dataset.next || "/chats");
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
