/*
 * Loaded on pages with embedded ipywidgets, after require.js and before
 * embed-amd.js (see nb_ipywidgets_js in _config.yml); `make vendor` copies it to
 * book/_vendor/html-manager/, next to embed-amd.js.
 */
(function () {
  "use strict";

  // 1. Each AMD module bundled in embed-amd.js finds its font files (Font
  //    Awesome, for the widgets' icons) in the folder of its own RequireJS URL.
  //    By default those URLs are resolved against the page's folder (404).
  //    Map every bundled module to a URL in the folder of this script, where
  //    `make vendor` copied the fonts.  The modules are defined inside
  //    embed-amd.js, so RequireJS never fetches these URLs.
  var here = new URL(".", document.currentScript.src).href;
  var paths = { "@jupyter-widgets/html-manager/dist": here.replace(/\/$/, "") };
  ["base", "controls", "base7", "controls7", "output", "html-manager"].forEach(function (name) {
    paths["@jupyter-widgets/" + name] = here + name;
  });
  window.requirejs.config({ paths: paths });

  // 2. @jupyter-widgets/base typesets widget labels with the MathJax 2 call
  //    MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the book loads
  //    MathJax 3, which has no Hub, so every labelled widget threw a TypeError.
  //    Translate the call.  Labels write math as $...$ (as in Jupyter), which
  //    the book's MathJax does not treat as math (only \(...\) and \[...\]),
  //    so rewrite the delimiters inside the label first.  Deferred scripts
  //    (MathJax) have run by DOMContentLoaded; widgets render on "load", after it.
  function dollarsToTeX(element) {
    var walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    var node;
    while ((node = walker.nextNode())) {
      if (node.nodeValue.indexOf("$") < 0) {
        continue;
      }
      node.nodeValue = node.nodeValue
        .replace(/\$\$([^$]+)\$\$/g, "\\[$1\\]")
        .replace(/\$([^$]+)\$/g, "\\($1\\)");
    }
  }

  function installHubShim() {
    var MJ = window.MathJax;
    if (!MJ || MJ.Hub || !MJ.startup) {
      return;
    }
    MJ.Hub = {
      Queue: function (job) {
        var element = job && job[2];
        if (!element || !MJ.typesetPromise || !MJ.startup.promise) {
          return;
        }
        dollarsToTeX(element);
        MJ.startup.promise = MJ.startup.promise
          .then(function () {
            return MJ.typesetPromise([element]);
          })
          .catch(function (err) {
            console.warn("MathJax typeset of a widget label failed:", err);
          });
      },
    };
  }
  document.addEventListener("DOMContentLoaded", installHubShim);
})();
