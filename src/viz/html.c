/*
 * html.c: the frame of the HTML pages (attention maps, training report): HTML5 with the
 * character set declared, one inline style sheet, no script and no external resource, so a page
 * is one file that opens anywhere, offline. A page of something in progress may reload itself
 * (<meta http-equiv="refresh">), which needs no script either.
 */
#include "viz_internal.h"

static const char css[] =
    "body{font-family:sans-serif;margin:16px 24px;color:#222222;background:#ffffff}\n"
    "h1{font-size:20px;margin:0 0 12px}\n"
    "h2{font-size:16px;margin:18px 0 6px}\n"
    ".toks{display:flex;flex-wrap:wrap;gap:4px;margin:4px 0 12px}\n"
    ".tok{border:1px solid #cccccc;border-radius:3px;padding:1px 4px;font-family:monospace;"
    "white-space:pre}\n"
    ".tok sub{color:#888888;margin-right:3px;font-family:sans-serif}\n"
    "details{margin:8px 0;border-top:1px solid #dddddd}\n"
    "summary{font-weight:bold;cursor:pointer;padding:6px 0}\n"
    ".maps{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}\n"
    "figure{margin:0}\n"
    "figcaption{font-size:12px;color:#555555}\n"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0 18px}\n"
    "td,th{border:1px solid #dddddd;padding:2px 8px;text-align:left}\n"
    "td.num{text-align:right;font-family:monospace}\n"
    ".note{color:#555555;font-size:13px}\n";

void vz_html_begin(vz_buf *b, const char *title) { vz_html_begin_refresh(b, title, 0); }

void vz_html_begin_refresh(vz_buf *b, const char *title, int refresh_s) {
    vz_puts(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    if (refresh_s > 0) vz_printf(b, "<meta http-equiv=\"refresh\" content=\"%d\">\n", refresh_s);
    vz_puts(b, "<title>");
    vz_put_text(b, title, 200, VZ_XML);
    vz_puts(b, "</title>\n<style>\n");
    vz_puts(b, css);
    vz_puts(b, "</style>\n</head>\n<body>\n<h1>");
    vz_put_text(b, title, 200, VZ_XML);
    vz_puts(b, "</h1>\n");
}

void vz_html_end(vz_buf *b) {
    vz_puts(b, "</body>\n</html>\n");
}
