'use strict';
// The token goes into a same-site cookie the node reads as a bearer credential; a page load cannot send a header.
document.getElementById('login').addEventListener('submit', (e) => {
  e.preventDefault();
  const token = document.getElementById('token').value;
  document.cookie = 'queen_token=' + encodeURIComponent(token) + '; path=/; SameSite=Strict';
  location.replace('/');
});
