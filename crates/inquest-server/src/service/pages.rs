//! Page tokens the list calls hand out: the cursor (the last item's id)
//! and an HMAC over what the token may be used for (which list, whose
//! tenant, which cursor) with the deployment's key. A token this
//! deployment did not issue for this list and tenant — forged, edited, or
//! another tenant's — is refused as INVALID_ARGUMENT (`INVALID_PAGE_TOKEN`),
//! as the proto promises; every replica shares the key, so a token from one
//! works on another.

use inquest_core::Tenant;
use ring::hmac;

use crate::status::ApiError;

/// Bytes of the tag kept in a token (128 bits).
const TAG_BYTES: usize = 16;

/// Which list a token pages through.
#[derive(Debug, Clone, Copy)]
pub enum PageList {
    Incidents,
    Sessions,
    AuditEvents,
    WebhookDeliveries,
}

impl PageList {
    fn as_str(self) -> &'static str {
        match self {
            PageList::Incidents => "incidents",
            PageList::Sessions => "sessions",
            PageList::AuditEvents => "audit_events",
            PageList::WebhookDeliveries => "webhook_deliveries",
        }
    }
}

/// Issues and checks page tokens with one deployment's key.
#[derive(Clone)]
pub struct PageTokens {
    key: hmac::Key,
}

impl PageTokens {
    pub fn new(key: &[u8]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
        }
    }

    /// The token that resumes `list` of `tenant` after `cursor`.
    pub fn issue(&self, list: PageList, tenant: &Tenant, cursor: &str) -> String {
        let tag = self.tag(list, tenant, cursor);
        format!("{cursor}.{}", hex(&tag.as_ref()[..TAG_BYTES]))
    }

    /// The cursor `token` carries; `None` for no token (the first page).
    pub fn read<'t>(
        &self,
        list: PageList,
        tenant: &Tenant,
        token: &'t str,
    ) -> Result<Option<&'t str>, ApiError> {
        if token.is_empty() {
            return Ok(None);
        }
        let (cursor, tag) = token.rsplit_once('.').ok_or(ApiError::InvalidPageToken)?;
        let expected = self.tag(list, tenant, cursor);
        // Compared in constant time: a near miss says nothing.
        let expected = hex(&expected.as_ref()[..TAG_BYTES]);
        let ok = tag.len() == expected.len()
            && tag
                .bytes()
                .zip(expected.bytes())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0;
        if ok {
            Ok(Some(cursor))
        } else {
            Err(ApiError::InvalidPageToken)
        }
    }

    fn tag(&self, list: PageList, tenant: &Tenant, cursor: &str) -> hmac::Tag {
        // Length-prefixed fields: no two (list, tenant, cursor) triples
        // sign the same bytes.
        let mut message = Vec::new();
        for field in [list.as_str(), tenant.as_str(), cursor] {
            message.extend_from_slice(&(field.len() as u64).to_be_bytes());
            message.extend_from_slice(field.as_bytes());
        }
        hmac::sign(&self.key, &message)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> Tenant {
        Tenant::parse(name).unwrap()
    }

    #[test]
    fn an_issued_token_reads_back_and_nothing_else_does() {
        let pages = PageTokens::new(&[7; 32]);
        let red = tenant("red");
        let token = pages.issue(
            PageList::Sessions,
            &red,
            "01890a5d-ac96-774b-bcce-b302099a8057",
        );
        assert_eq!(
            pages.read(PageList::Sessions, &red, &token).unwrap(),
            Some("01890a5d-ac96-774b-bcce-b302099a8057")
        );
        assert_eq!(pages.read(PageList::Sessions, &red, "").unwrap(), None);
        let edited = token.replacen("01890a5d", "01890a5e", 1);
        let refused = [
            // Another tenant's, another list's, another deployment's.
            pages.read(PageList::Sessions, &tenant("blue"), &token),
            pages.read(PageList::Incidents, &red, &token),
            PageTokens::new(&[8; 32]).read(PageList::Sessions, &red, &token),
            // Edited, bare, forged.
            pages.read(PageList::Sessions, &red, &edited),
            pages.read(
                PageList::Sessions,
                &red,
                "01890a5d-ac96-774b-bcce-b302099a8057",
            ),
            pages.read(PageList::Sessions, &red, "forged.00"),
        ];
        for r in refused {
            assert!(matches!(r, Err(ApiError::InvalidPageToken)), "{r:?}");
        }
    }
}
