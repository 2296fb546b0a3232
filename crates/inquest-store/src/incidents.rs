use inquest_core::{IncidentId, IncidentText};
use time::OffsetDateTime;

use crate::{Store, StoreError, rows::get, text};

#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    pub id: IncidentId,
    pub title: String,
    pub description: String,
    pub created_at: OffsetDateTime,
}

impl Store {
    pub async fn create_incident(&self, input: &IncidentText) -> Result<Incident, StoreError> {
        let id = IncidentId::new();
        // Title and description may hold U+0000: stored escaped (crate::text).
        let escaped = text::has_nul(input.title()) || text::has_nul(input.description());
        let title = text::field(input.title(), escaped);
        let description = text::field(input.description(), escaped);
        let row = self
            .run("create_incident", async |c| {
                Ok(c.query_one(
                    "INSERT INTO incidents (id, title, description, escaped) \
                     VALUES ($1, $2, $3, $4) RETURNING created_at",
                    &[id.as_uuid(), &&*title, &&*description, &escaped],
                )
                .await?)
            })
            .await?;
        Ok(Incident {
            id,
            title: input.title().to_owned(),
            description: input.description().to_owned(),
            created_at: get(&row, 0)?,
        })
    }

    pub async fn get_incident(&self, id: IncidentId) -> Result<Incident, StoreError> {
        let row = self
            .run("get_incident", async |c| {
                Ok(c.query_opt(
                    "SELECT title, description, created_at, escaped FROM incidents WHERE id = $1",
                    &[id.as_uuid()],
                )
                .await?)
            })
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "incident",
                id: id.to_string(),
            })?;
        let escaped: bool = get(&row, 3)?;
        Ok(Incident {
            id,
            title: text::read(get(&row, 0)?, escaped, "incident title")?,
            description: text::read(get(&row, 1)?, escaped, "incident description")?,
            created_at: get(&row, 2)?,
        })
    }
}
