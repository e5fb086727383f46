/* framing.c - where the events of a watch stream end, see framing.h. */
#include "kube/framing.h"

#include <string.h>
#include <strings.h>

/* The media type of a Content-Type value, without parameters or blanks. */
static bool media_type_is(const char *ct, const char *type)
{
	while (*ct == ' ' || *ct == '\t')
		ct++;
	size_t n = strlen(type);
	if (strncasecmp(ct, type, n))
		return false;
	ct += n;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return !*ct || *ct == ';';
}

void framing_init(struct framing *f, const char *content_type)
{
	memset(f, 0, sizeof *f);
	if (!content_type)
		f->kind = FRAMING_UNKNOWN;
	else if (media_type_is(content_type, "application/json"))
		f->kind = FRAMING_LINES;
	else if (media_type_is(content_type, "application/vnd.kubernetes.protobuf"))
		f->kind = FRAMING_LENGTH;
}

static void feed_length(struct framing *f, const unsigned char *p, size_t len)
{
	while (len) {
		if (f->left) {
			size_t n = len < f->left ? len : f->left;
			f->left -= (uint32_t)n;
			p += n;
			len -= n;
			continue;
		}
		f->length = f->length << 8 | *p++;
		len--;
		if (++f->head == 4) {
			f->left = f->length;
			f->head = 0;
			f->length = 0;
		}
	}
}

void framing_feed(struct framing *f, const char *data, size_t len)
{
	if (!len)
		return;
	if (f->kind == FRAMING_LINES)
		f->mid_line = data[len - 1] != '\n';
	else if (f->kind == FRAMING_LENGTH)
		feed_length(f, (const unsigned char *)data, len);
	else
		f->mid_line = true; /* unknown: bytes were passed, no boundary known */
}

bool framing_between_events(const struct framing *f)
{
	if (f->kind == FRAMING_LENGTH)
		return f->head == 0 && f->left == 0;
	return !f->mid_line;
}
