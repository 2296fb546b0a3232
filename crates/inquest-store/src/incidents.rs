use inquest_core::{IncidentId, IncidentText};
use time::OffsetDateTime;

use crate::{Store, StoreError, rows::get};

#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    pub id: IncidentId,
    pub title: String,
    pub description: String,
    pub created_at: OffsetDateTime,
}

impl Store {
    pub async fn create_incident(&self, text: &IncidentText) -> Result<Incident, StoreError> {
        let id = IncidentId::new();
        let row = self
            .run("create_incident", async |c| {
                Ok(c.query_one(
                    "INSERT INTO incidents (id, title, description) VALUES ($1, $2, $3) \
                     RETURNING created_at",
                    &[id.as_uuid(), &text.title(), &text.description()],
                )
                .await?)
            })
            .await?;
        Ok(Incident {
            id,
            title: text.title().to_owned(),
            description: text.description().to_owned(),
            created_at: get(&row, 0)?,
        })
    }

    pub async fn get_incident(&self, id: IncidentId) -> Result<Incident, StoreError> {
        let row = self
            .run("get_incident", async |c| {
                Ok(c.query_opt(
                    "SELECT title, description, created_at FROM incidents WHERE id = $1",
                    &[id.as_uuid()],
                )
                .await?)
            })
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "incident",
                id: id.to_string(),
            })?;
        Ok(Incident {
            id,
            title: get(&row, 0)?,
            description: get(&row, 1)?,
            created_at: get(&row, 2)?,
        })
    }
}
