/*
 * colormap.c: viridis, the perceptually uniform colour map of matplotlib (van der Walt and Smith,
 * 2015; CC0), and the nearest xterm 256-colour palette entry.
 *
 * The table holds viridis at v = k / 32, k = 0 .. 32, in 8-bit sRGB units: matplotlib's 256-entry
 * table (_viridis_data) interpolated at position 255 k / 32 and scaled by 255. Between samples
 * the colour is interpolated linearly and rounded half up; it stays within 1.7 units of
 * matplotlib's table everywhere, and is exact at 0 (#440154) and 1 (#fde725).
 */
#include "viz_internal.h"

#include <math.h>
#include <stdio.h>

static const double viridis[33][3] = {
    {68.1, 1.2, 84.0},    {70.6, 12.8, 95.8},   {72.0, 24.1, 106.3},  {72.1, 34.5, 115.5},
    {71.1, 44.6, 123.2},  {69.1, 54.4, 129.2},  {66.1, 63.9, 133.7},  {62.6, 73.1, 136.9},
    {58.7, 81.9, 139.1},  {54.8, 90.4, 140.5},  {51.0, 98.5, 141.4},  {47.5, 106.4, 142.0},
    {44.2, 114.1, 142.3}, {41.1, 121.6, 142.3}, {38.2, 129.1, 142.1}, {35.3, 136.6, 141.5},
    {32.7, 144.1, 140.5}, {30.8, 151.6, 138.8}, {30.7, 159.1, 136.2}, {33.4, 166.5, 132.8},
    {39.6, 173.8, 128.3}, {49.2, 180.9, 122.7}, {61.6, 187.8, 115.9}, {76.2, 194.4, 107.9},
    {92.5, 200.6, 98.6},  {110.4, 206.3, 88.0}, {129.6, 211.5, 76.3}, {149.8, 216.0, 63.5},
    {170.7, 219.9, 49.8}, {192.0, 223.1, 36.4}, {213.2, 226.0, 26.1}, {233.7, 228.5, 25.7},
    {253.3, 231.1, 36.7},
};

vz_rgb vz_viridis(double v) {
    if (!(v > 0)) v = 0; /* also -inf */
    if (v > 1) v = 1;
    double t = v * 32;
    int i = (int)t;
    if (i > 31) i = 31;
    double f = t - i;
    unsigned char c[3];
    for (int d = 0; d < 3; d++) {
        double x = viridis[i][d] + (viridis[i + 1][d] - viridis[i][d]) * f;
        c[d] = (unsigned char)floor(x + 0.5);
    }
    return (vz_rgb){c[0], c[1], c[2]};
}

const char *vz_hex(char *buf, vz_rgb c) {
    snprintf(buf, 8, "#%02x%02x%02x", c.r, c.g, c.b);
    return buf;
}

int vz_xterm256(vz_rgb c) {
    static const int level[6] = {0, 95, 135, 175, 215, 255};
    int best = 16;
    long best_d = -1;
    for (int k = 16; k < 256; k++) {
        int r, g, b;
        if (k < 232) {
            int q = k - 16;
            r = level[q / 36], g = level[q / 6 % 6], b = level[q % 6];
        } else {
            r = g = b = 8 + 10 * (k - 232);
        }
        long d =
            (long)(r - c.r) * (r - c.r) + (long)(g - c.g) * (g - c.g) + (long)(b - c.b) * (b - c.b);
        if (best_d < 0 || d < best_d) best = k, best_d = d;
    }
    return best;
}
