/* /docs: Swagger UI on this server's /openapi.json, from files served by the dashboard itself
 * (no CDN, and no inline script: the Content-Security-Policy allows scripts from this origin only).
 * SwaggerUIBundle is the global that swagger-ui-bundle.js (a classic script) defines. */
// validatorUrl: null: no badge fetched from the validator service on the internet
SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null });
